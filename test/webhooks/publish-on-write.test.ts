import { expect } from 'chai';
import { connectBus } from '../../src/bus/natsConnection.ts';
import { BusNames } from '../../src/bus/jetStreamDefinitions.ts';
import { readDeploymentId } from '../../src/db/deploymentIdentity.ts';
import { Database } from '../../src/db/database.ts';
import { DeliveryPublisher } from '../../src/delivery/deliveryPublisher.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { BatchStatements } from '../../src/events/storeBatch.ts';
import { ServiceMetrics } from '../../src/platform/metrics.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent, producerEvent } from '../support/newEvents.ts';
import { PrivateNats } from '../support/private-services.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { TEST_INGEST_TOKEN, call, mintKey, startTestService, testConfig, testLogger, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';

const DELIVERY_ENV = {
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  DELIVERY_RELAY_POLL_MS: '50',
  // The lost-publication sweep looks every second (half the ack wait).
  DELIVERY_ACK_WAIT_MS: '2000',
};

/**
 * Ingest publishes the deliveries of the events it writes itself (delivery/deliveryPublisher.ts); the
 * relays stay the guarantee for what it could not publish. Real Postgres, NATS JetStream and a loopback
 * receiver; the service under test runs without a relay where the test says so, so that a delivery that
 * arrives can only have been published by the writer.
 */
describe('publishing deliveries on write', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let receiver: TestReceiver;
  const tenantId = 'publish-on-write';
  const stopLater: Array<() => Promise<unknown>> = [];

  before(async () => {
    db = await createTestDatabase();
    // No relay: only the writer can publish.
    service = await startTestService({ databaseUrl: db.url, roles: ['api', 'ingest', 'worker'], env: DELIVERY_ENV });
    receiver = await startReceiver(204);
    const { key } = await mintKey(db.url, { tenantId, scopes: ['webhooks:write'] });
    const registered = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url: receiver.url, event_filter: ['phi.'] } });
    expect(registered.status, registered.text).to.equal(201);
  });

  after(async () => {
    for (const stop of stopLater.reverse()) await stop();
    await noRelayRunning();
    await service?.stop();
    await receiver?.close();
    await db?.drop();
  });

  const receivedIds = () => new Set(receiver.received.map((delivery) => delivery.json().id as string));

  async function deliveryRows(eventIds: readonly string[]) {
    const { rows } = await db.pool.query<{ state: string; published: boolean; publications: number }>(
      `SELECT state, published_at IS NOT NULL AS published, publications FROM deliveries WHERE event_id = ANY($1::uuid[])`,
      [eventIds],
    );
    return rows;
  }

  /** A publisher and a writer of this test's own, on the service's NATS; `namespace` names its streams. */
  async function ownWriter(namespace: string): Promise<{ writer: EventWriter; publisher: DeliveryPublisher; metrics: ServiceMetrics }> {
    const pool = new Database({ url: db.url, poolSize: 2, applicationName: 'test writer', log: testLogger() });
    const bus = await connectBus(testConfig(db.url).natsUrl, 'test writer', testLogger());
    stopLater.push(
      () => pool.close(),
      () => bus.close(),
    );
    const names = new BusNames({ namespace, deploymentId: await readDeploymentId(pool) });
    const metrics = new ServiceMetrics();
    const publisher = new DeliveryPublisher({ db: pool, bus, names, log: testLogger(), metrics });
    stopLater.push(() => publisher.drain());
    return { writer: new EventWriter(pool, WEBHOOK_FAN_OUT, metrics, publisher), publisher, metrics };
  }

  /** A relay in the service's namespace, started by the first test that needs one. */
  let relay: TestService | undefined;
  async function relayRunning(): Promise<void> {
    if (relay) return;
    relay = await startTestService({ databaseUrl: db.url, roles: ['relay'], env: DELIVERY_ENV, busNamespace: service.busNamespace });
  }

  /** What only the writer did shows with no relay about: a relay a test before started is stopped. */
  async function noRelayRunning(): Promise<void> {
    await relay?.stop();
    relay = undefined;
  }

  it('delivers events posted to ingest with no relay running, each published once', async () => {
    const events = Array.from({ length: 120 }, () => producerEvent({ tenant_id: tenantId, action: 'phi.read' }));
    const response = await call(`${service.internalUrl}/internal/v1/events`, {
      body: { events },
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
    });
    expect(response.status, response.text).to.equal(200);
    const eventIds = (response.json.events as Array<{ event_id: string }>).map((event) => event.event_id);
    await waitFor(() => eventIds.every((id) => receivedIds().has(id)), 'every event delivered', 20_000);
    // The outcomes are recorded after the requests, in batches.
    await waitFor(async () => (await deliveryRows(eventIds)).every((row) => row.state === 'succeeded'), 'every outcome recorded');
    const rows = await deliveryRows(eventIds);
    expect(rows).to.have.length(120);
    expect(rows.every((row) => row.publications === 1)).to.equal(true);
    expect(await service.metric('audit_webhook_relay_published_total')).to.be.at.least(120);
  });

  it('hands deliveries it could not publish to the relays, and leaves the next writes to them for a while', async () => {
    // A namespace without streams: JetStream answers no publish to it.
    const { writer, publisher, metrics } = await ownWriter(`nostream${Date.now()}`);
    const first = Array.from({ length: 60 }, () => newEvent({ tenantId, action: 'phi.update' }));
    await writer.write(first, 'test');
    await waitFor(
      async () => (await deliveryRows(first.map((event) => event.eventId))).every((row) => !row.published),
      'the deliveries handed back',
      15_000,
    );
    expect(publisher.accepting).to.equal(false);
    expect(await metrics.registry.getSingleMetricAsString('audit_errors_total')).to.contain('kind="publish_on_write_failed"');
    // Written while the publisher pauses: unpublished, for the relays, as without a publisher.
    const second = Array.from({ length: 10 }, () => newEvent({ tenantId, action: 'phi.update' }));
    await writer.write(second, 'test');
    expect((await deliveryRows(second.map((event) => event.eventId))).every((row) => !row.published && row.publications === 0)).to.equal(
      true,
    );
    expect(receivedIds().has(first[0]!.eventId)).to.equal(false);

    // A relay in the service's namespace publishes both; the service's worker delivers them.
    await relayRunning();
    const all = [...first, ...second].map((event) => event.eventId);
    await waitFor(() => all.every((id) => receivedIds().has(id)), 'the handed-back deliveries delivered by way of the relay', 20_000);
  });

  it('has the relays republish what a writer marked published and never published (a process that died in between)', async () => {
    // The statement ingest runs, without the publish that follows its commit.
    const events = Array.from({ length: 40 }, () => newEvent({ tenantId, action: 'phi.delete' }));
    const started = Date.now();
    await new BatchStatements(WEBHOOK_FAN_OUT).store(
      db.pool,
      { events, timestamps: events.map((event) => formatTimestamp(event.occurredAtMs)), form: 'compact' },
      'writer',
    );
    const eventIds = events.map((event) => event.eventId);
    expect((await deliveryRows(eventIds)).every((row) => row.published && row.publications === 1)).to.equal(true);
    // A relay sweeps every second; a delivery marked published counts as lost once the consumer has
    // acknowledged everything the stream held 5 s (the publish timeout) after it.
    await relayRunning();
    await waitFor(() => eventIds.every((id) => receivedIds().has(id)), 'the unpublished deliveries found and delivered', 20_000);
    expect(Date.now() - started).to.be.below(15_000);
    await waitFor(async () => (await deliveryRows(eventIds)).every((row) => row.state === 'succeeded'), 'every outcome recorded');
    expect((await deliveryRows(eventIds)).every((row) => row.publications === 2)).to.equal(true);
  });

  it("leaves an ordered endpoint's deliveries queued for the relays to start, one at a time, in order", async () => {
    // The relay an earlier test started would start the first of them as soon as they are written (a fresh-clone
    // run read it pending): whether the writer left them queued is seen with none running.
    await noRelayRunning();
    const ordered = await startReceiver(204);
    stopLater.push(() => ordered.close());
    const { key } = await mintKey(db.url, { tenantId: 'ordered-writer', scopes: ['webhooks:write'] });
    const registered = await call(`${service.baseUrl}/audit/webhooks`, {
      key,
      body: { url: ordered.url, event_filter: ['phi.'], ordered: true },
    });
    expect(registered.status, registered.text).to.equal(201);
    const events = Array.from({ length: 5 }, (_, index) =>
      producerEvent({ tenant_id: 'ordered-writer', action: 'phi.read', timestamp: new Date(Date.now() + index).toISOString() }),
    );
    const response = await call(`${service.internalUrl}/internal/v1/events`, {
      body: { events },
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
    });
    expect(response.status, response.text).to.equal(200);
    const eventIds = (response.json.events as Array<{ event_id: string }>).map((event) => event.event_id);
    // Written queued and unpublished: the writer publishes none of them, whatever it publishes of the others.
    const rows = await deliveryRows(eventIds);
    expect(rows.map((row) => [row.state, row.published, row.publications])).to.deep.equal(Array(5).fill(['queued', false, 0]));
    await relayRunning();
    await waitFor(() => ordered.received.length === 5, 'the five, started by the relay and the worker in turn', 20_000);
    expect(ordered.received.map((delivery) => delivery.json().id)).to.deep.equal(eventIds);
  });
});

/** With a NATS of this file's own, stopped under a running service by its PID. */
describe('publishing deliveries on write while NATS is down', function () {
  this.timeout(90_000);
  let nats: PrivateNats;
  let db: TestDatabase;
  let service: TestService;
  let receiver: TestReceiver;
  let relay: TestService | undefined;
  const tenantId = 'publish-outage';

  before(async () => {
    nats = await PrivateNats.start();
    db = await createTestDatabase();
    // No relay yet: during the outage only the writer could touch the deliveries.
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'ingest', 'worker'],
      env: { ...DELIVERY_ENV, NATS_URL: nats.url },
    });
    receiver = await startReceiver(204);
    const { key } = await mintKey(db.url, { tenantId, scopes: ['webhooks:write'] });
    const registered = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url: receiver.url, event_filter: [] } });
    expect(registered.status, registered.text).to.equal(201);
  });

  after(async () => {
    await relay?.stop();
    await service?.stop();
    await receiver?.close();
    await db?.drop();
    await nats?.remove();
  });

  it('writes the deliveries for the relays meanwhile, and they are delivered once NATS is back', async () => {
    await nats.stop();
    await waitFor(async () => (await call(`${service.internalUrl}/readyz`)).json.checks.nats.ok === false, 'the service to see NATS gone');
    const response = await call(`${service.internalUrl}/internal/v1/events`, {
      body: { events: Array.from({ length: 30 }, () => producerEvent({ tenant_id: tenantId })) },
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
    });
    expect(response.status, response.text).to.equal(200);
    const eventIds = (response.json.events as Array<{ event_id: string }>).map((event) => event.event_id);
    const { rows } = await db.pool.query<{ published: boolean; publications: number }>(
      'SELECT published_at IS NOT NULL AS published, publications FROM deliveries WHERE event_id = ANY($1::uuid[])',
      [eventIds],
    );
    // Stored with their deliveries, unpublished and unclaimed: the relays' to publish.
    expect(rows).to.have.length(30);
    expect(rows.every((row) => !row.published && row.publications === 0)).to.equal(true);

    await nats.start();
    relay = await startTestService({
      databaseUrl: db.url,
      roles: ['relay'],
      env: { ...DELIVERY_ENV, NATS_URL: nats.url },
      busNamespace: service.busNamespace,
    });
    const received = () => new Set(receiver.received.map((delivery) => delivery.json().id as string));
    await waitFor(() => eventIds.every((id) => received().has(id)), 'the events written during the outage delivered', 30_000);
  });
});
