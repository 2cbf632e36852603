import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { PrivateNats } from '../support/private-services.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { RoleProcesses } from '../support/roleProcesses.ts';
import { TEST_ENCRYPTION_KEY, call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const DELIVERY_ENV = {
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  DELIVERY_SCHEDULE: '200ms,200ms,200ms,200ms',
  DELIVERY_RELAY_POLL_MS: '50',
  // A killed worker's messages come back to the others after this long.
  DELIVERY_ACK_WAIT_MS: '2000',
};

/** Distinct event ids received so far. */
const idsReceived = (receiver: TestReceiver) => new Set(receiver.received.map((delivery) => delivery.json().id as string));

describe('webhook delivery survives crashes (at least once)', function () {
  this.timeout(90_000);
  let nats: PrivateNats;
  let db: TestDatabase;
  let api: TestService;
  let receiver: TestReceiver;
  let key: string;
  const roles = new RoleProcesses();

  before(async () => {
    nats = await PrivateNats.start();
    db = await createTestDatabase();
    // The api and relay run here; workers run as child processes that can be killed.
    api = await startTestService({ databaseUrl: db.url, roles: ['api', 'relay'], env: { ...DELIVERY_ENV, NATS_URL: nats.url } });
    receiver = await startReceiver(204);
    ({ key } = await mintKey(db.url, { tenantId: 'crash', scopes: ['webhooks:write', 'audit:read'] }));
    const registered = await call(`${api.baseUrl}/audit/webhooks`, { key, body: { url: receiver.url, event_filter: ['phi.'] } });
    expect(registered.status).to.equal(201);
  });

  after(async () => {
    roles.killAll();
    await api?.stop();
    await receiver?.close();
    await db?.drop();
    await nats?.remove();
  });

  function startWorkerProcess(): Promise<ChildProcess> {
    return roles.start(['worker'], {
      ...DELIVERY_ENV,
      DATABASE_URL: db.url,
      NATS_URL: nats.url,
      NATS_NAMESPACE: api.busNamespace,
      SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    });
  }

  async function deliveryStates(): Promise<Record<string, number>> {
    const { rows } = await db.pool.query(`SELECT state, count(*)::int AS n FROM deliveries WHERE tenant_id = 'crash' GROUP BY state`);
    return Object.fromEntries(rows.map((row) => [row.state, row.n]));
  }

  it('loses nothing when a worker is killed with SIGKILL mid-delivery', async () => {
    const events = Array.from({ length: 30 }, () => newEvent({ tenantId: 'crash', action: 'phi.read' }));
    // Requests hang until the worker is dead: it dies with deliveries on the wire and unacknowledged.
    receiver.reply('hang');
    const first = await startWorkerProcess();
    await seedEvents(db.url, events);
    await waitFor(() => receiver.received.length >= 10, 'deliveries in flight');
    await roles.kill(first);
    receiver.reply(204);

    await startWorkerProcess();
    await waitFor(async () => (await deliveryStates()).succeeded === 30, 'every delivery to succeed', 30_000);
    const wanted = new Set(events.map((event) => event.eventId));
    expect([...wanted].every((id) => idsReceived(receiver).has(id))).to.equal(true);
  });

  it('loses nothing across a NATS restart', async () => {
    const before = receiver.received.length;
    const relayFailures = () => api.metric('audit_errors_total{kind="relay_failed"}');
    const failuresBefore = await relayFailures();
    await nats.stop();
    const events = Array.from({ length: 20 }, () => newEvent({ tenantId: 'crash', action: 'phi.query' }));
    // Written while NATS is down: the relay fails to publish them, and they wait in the outbox.
    await seedEvents(db.url, events);
    await waitFor(async () => (await relayFailures()) > failuresBefore, 'the relay to fail to publish', 30_000);
    expect(await deliveryStates()).to.deep.equal({ succeeded: 30, pending: 20 });
    expect(receiver.received.length).to.equal(before);
    await nats.start();
    await waitFor(async () => (await deliveryStates()).succeeded === 50, 'every delivery to succeed after the restart', 45_000);
    const received = idsReceived(receiver);
    expect(events.every((event) => received.has(event.eventId))).to.equal(true);
  });
});
