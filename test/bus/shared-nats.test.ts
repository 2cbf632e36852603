import { expect } from 'chai';
import { RetentionPolicy, StorageType, jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { readDeploymentId } from '../../src/db/deploymentIdentity.ts';
import type { Role } from '../../src/main.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent, producerEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { PrivateNats } from '../support/private-services.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';
import { insertEndpointRow } from '../support/webhookEndpoints.ts';

/**
 * Deployments that share one NATS, with the names they get by default (no NATS_NAMESPACE). The default
 * names are the ones every real deployment uses, so this file runs a NATS server of its own rather than
 * create or stamp them on the machine's.
 */

/** The error a start-up failed with, or undefined when it started. */
function refusal(starting: Promise<unknown>): Promise<Error | undefined> {
  return starting.then(
    () => undefined,
    (error: Error) => error,
  );
}

describe('deployments sharing a NATS', function () {
  this.timeout(60_000);
  let nats: PrivateNats;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let first: TestDatabase;
  let second: TestDatabase;
  let firstId: string;
  let secondId: string;
  const running: TestService[] = [];
  const receivers: TestReceiver[] = [];

  /** A service on the private NATS with the production default names unless a namespace is given. */
  async function start(db: TestDatabase, roles: Role[], busNamespace: string | null = null) {
    const service = await startTestService({
      databaseUrl: db.url,
      roles,
      busNamespace,
      env: { NATS_URL: nats.url, WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_RELAY_POLL_MS: '50' },
    });
    running.push(service);
    return service;
  }

  before(async () => {
    nats = await PrivateNats.start();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    [first, second] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    [firstId, secondId] = await Promise.all([readDeploymentId(first.pool), readDeploymentId(second.pool)]);
    // Two real deployments' delivery ids differ: a message of one never names a row of the other by chance.
    await second.pool.query('ALTER TABLE deliveries ALTER COLUMN id RESTART WITH 1000000');
  });

  afterEach(async () => {
    await Promise.all(running.splice(0).map((service) => service.stop()));
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
    // The server is this file's own: every stream on it is one of ours.
    for await (const name of jsm.streams.names()) await jsm.streams.delete(name);
  });

  after(async () => {
    await nc?.close();
    await nats?.remove();
    await first?.drop();
    await second?.drop();
  });

  it('gives each deployment a delivery stream of its own, so each delivers all its events at once', async () => {
    const publishers = new Map<string, Set<string>>();
    const subscriptions = [firstId, secondId].map((id) => {
      const seen = new Set<string>();
      publishers.set(id, seen);
      return nc.subscribe(`${id}.audit.deliveries`, {
        callback: (_, message) => {
          seen.add(message.headers?.get('Audit-Trail-Deployment') || '(none)');
        },
      });
    });
    const deployments = await Promise.all(
      [first, second].map(async (db) => {
        const service = await start(db, ['api', 'relay', 'worker']);
        const receiver = await startReceiver(204);
        receivers.push(receiver);
        const { key } = await mintKey(db.url, { tenantId: 'acme', scopes: ['webhooks:write'] });
        const registered = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url: receiver.url, event_filter: ['phi.'] } });
        expect(registered.status, registered.text).to.equal(201);
        return { db, receiver, events: Array.from({ length: 10 }, () => newEvent({ tenantId: 'acme' })) };
      }),
    );
    await Promise.all(deployments.map(({ db, events }) => seedEvents(db.url, events)));
    // Sooner than a message lost to the other deployment could be republished: the relay's sweep needs two
    // intervals of half the 30 s ack wait.
    for (const { db, receiver, events } of deployments) {
      await waitFor(() => receiver.received.length >= events.length, `all ${events.length} deliveries of ${db.name}`, 10_000);
      expect(receiver.received.map((delivery) => delivery.json().id).sort()).to.deep.equal(events.map((event) => event.eventId).sort());
      await waitFor(async () => {
        const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE state = 'succeeded' AND attempts = 1`);
        return rows[0].n === events.length;
      }, `every delivery of ${db.name} recorded with one attempt`);
    }
    const streams: string[] = [];
    for await (const name of jsm.streams.names()) streams.push(name);
    // Every message names the deployment that published it.
    for (const subscription of subscriptions) subscription.unsubscribe();
    expect(publishers.get(firstId)).to.deep.equal(new Set([firstId]));
    expect(publishers.get(secondId)).to.deep.equal(new Set([secondId]));
    expect(streams.sort()).to.deep.equal(
      [`${firstId.toUpperCase()}_AUDIT_DELIVERIES`, `${secondId.toUpperCase()}_AUDIT_DELIVERIES`].sort(),
    );
  });

  it('adopts the unstamped ingest stream of an earlier version, consuming what it holds', async () => {
    // As 0.1.0 created it, without a description.
    await jsm.streams.add({
      name: 'AUDIT_INGEST',
      subjects: ['audit.ingest.>'],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      max_age: 7 * 24 * 3_600_000 * 1_000_000,
      duplicate_window: 120_000 * 1_000_000,
    });
    const waiting = producerEvent({ tenant_id: 'legacy' });
    await jetstream(nc).publish('audit.ingest.legacy', JSON.stringify(waiting));

    await start(first, ['ingest']);
    await waitFor(
      async () => (await first.pool.query(`SELECT 1 FROM events WHERE tenant_id = 'legacy'`)).rowCount === 1,
      'the waiting event stored',
    );
    expect((await jsm.streams.info('AUDIT_INGEST')).config.description).to.match(new RegExp(`^audit-trail deployment ${firstId}:`));
  });

  it("refuses to start on another deployment's streams, naming NATS_NAMESPACE, and starts with one of its own", async () => {
    await start(first, ['ingest']);
    let refused = await refusal(start(second, ['ingest']));
    expect(refused, "the second deployment started on the first one's ingest stream").to.be.instanceOf(Error);
    expect(refused!.message).to.include('AUDIT_INGEST').and.include('NATS_NAMESPACE').and.include(firstId).and.include(secondId);
    expect((await jsm.streams.info('AUDIT_INGEST')).config.description).to.match(new RegExp(`^audit-trail deployment ${firstId}:`));

    await start(second, ['ingest'], 'second');
    await jetstream(nc).publish('second.audit.ingest.own', JSON.stringify(producerEvent({ tenant_id: 'own' })));
    await waitFor(
      async () => (await second.pool.query(`SELECT 1 FROM events WHERE tenant_id = 'own'`)).rowCount === 1,
      'its own event stored',
    );

    // One NATS_NAMESPACE given to two deployments: the delivery stream is refused the same way.
    await start(first, ['relay', 'worker'], 'shared');
    refused = await refusal(start(second, ['worker'], 'shared'));
    expect(refused?.message).to.include('SHARED_AUDIT_DELIVERIES').and.include('NATS_NAMESPACE');
  });

  describe('a worker given messages it cannot resolve', () => {
    let worker: TestService;
    let stream: string;
    let subject: string;

    const foreignMessages = async () => {
      const { values } = await worker.service.metrics.errors.get();
      return values.find((value) => value.labels.kind === 'delivery_foreign_message')?.value ?? 0;
    };
    const consumerDeliveries = async () => (await jsm.consumers.info(stream, 'audit-delivery-workers')).delivered.consumer_seq;
    const stillInStream = async (seq: number) => (await jsm.streams.getMessage(stream, { seq })) !== null;
    const publish = async (body: string, publisher?: string) => {
      const set = headers();
      if (publisher !== undefined) set.set('Audit-Trail-Deployment', publisher);
      return (await jetstream(nc).publish(subject, body, { headers: set })).seq;
    };

    beforeEach(async () => {
      // A namespace of its own: the rule is the worker's, whatever its stream is called.
      worker = await start(first, ['worker'], 'w');
      stream = 'W_AUDIT_DELIVERIES';
      subject = 'w.audit.deliveries';
    });

    it('leaves a message of another deployment for its owner: never acknowledged, reported once', async () => {
      const before = await consumerDeliveries();
      const seq = await publish('{"b":[["1",1]]}', 'otherdeploy1');
      // Handed out three times (given back twice), and still there.
      await waitFor(async () => (await consumerDeliveries()) >= before + 3, 'the message to come back twice', 20_000);
      expect(await stillInStream(seq)).to.equal(true);
      expect(await foreignMessages()).to.equal(1);
    });

    it('leaves a message of no named deployment whose delivery it does not have; acknowledges one of its own', async () => {
      const before = await consumerDeliveries();
      const unnamed = await publish('{"b":[["424242",1]]}');
      await waitFor(async () => (await consumerDeliveries()) >= before + 2, 'the message to come back', 20_000);
      expect(await stillInStream(unnamed)).to.equal(true);
      expect(await foreignMessages()).to.equal(1);
      await jsm.streams.deleteMessage(stream, unnamed);

      // Ours, for a delivery deleted with its endpoint: nothing to do, acknowledged as before.
      const ours = await publish('{"b":[["424243",1]]}', firstId);
      await waitFor(async () => !(await stillInStream(ours)), 'our message to be acknowledged');
      expect(await foreignMessages()).to.equal(1);
    });

    it('delivers a message of no named deployment whose delivery it has (published before an upgrade)', async () => {
      const receiver = await startReceiver(204);
      receivers.push(receiver);
      const endpointId = `wh_${'b'.repeat(32)}`;
      await insertEndpointRow(first.pool, { id: endpointId, tenantId: 'upgrade', url: receiver.url });
      const event = newEvent({ tenantId: 'upgrade' });
      await seedEvents(first.url, [event]);
      // As the relay of the earlier version left it: marked published, its message on the stream without a name.
      const { rows } = await first.pool.query(
        `UPDATE deliveries SET published_at = now(), publications = 1 WHERE endpoint_id = $1 RETURNING id::text AS id`,
        [endpointId],
      );
      const seq = await publish(JSON.stringify({ b: [[rows[0].id, 1]] }));
      await waitFor(() => receiver.received.length === 1, 'the delivery');
      expect(receiver.received[0]!.json().id).to.equal(event.eventId);
      await waitFor(async () => !(await stillInStream(seq)), 'the message to be acknowledged');
      expect(await foreignMessages()).to.equal(0);
    });
  });
});
