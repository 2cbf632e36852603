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
  // A failed first attempt waits an hour: only a manual retry makes the next one within the test.
  DELIVERY_SCHEDULE: '1h',
  DELIVERY_RELAY_POLL_MS: '50',
  // A killed worker's messages come back to the others after this long.
  DELIVERY_ACK_WAIT_MS: '2000',
};
const DAY_MS = 86_400_000;

describe('manual retries and replays survive SIGKILL', function () {
  this.timeout(120_000);
  let nats: PrivateNats;
  let db: TestDatabase;
  const services: TestService[] = [];
  const receivers: TestReceiver[] = [];
  const roles = new RoleProcesses();

  before(async () => {
    nats = await PrivateNats.start();
    db = await createTestDatabase();
  });

  after(async () => {
    roles.killAll();
    for (const service of services) await service.stop();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await db?.drop();
    await nats?.remove();
  });

  async function service(roles: Array<'api' | 'relay' | 'worker'>, namespace?: string): Promise<TestService> {
    const started = await startTestService({
      databaseUrl: db.url,
      roles,
      env: { ...DELIVERY_ENV, NATS_URL: nats.url },
      busNamespace: namespace,
    });
    services.push(started);
    return started;
  }

  /** A process of its own with the given roles, to be killed. */
  function startProcess(role: 'worker' | 'relay', namespace: string): Promise<ChildProcess> {
    return roles.start([role], {
      ...DELIVERY_ENV,
      DATABASE_URL: db.url,
      NATS_URL: nats.url,
      NATS_NAMESPACE: namespace,
      SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    });
  }

  const kill = (child: ChildProcess) => roles.kill(child);

  async function receiver(): Promise<TestReceiver> {
    const started = await startReceiver(204);
    receivers.push(started);
    return started;
  }

  async function register(baseUrl: string, key: string, url: string): Promise<string> {
    const response = await call(`${baseUrl}/audit/webhooks`, { key, body: { url, event_filter: ['phi.'] } });
    expect(response.status, response.text).to.equal(201);
    return response.json.endpoint.id;
  }

  it('makes a retry accepted before its worker was killed mid-attempt', async () => {
    // The api and relay run here; the worker is a process of its own.
    const api = await service(['api', 'relay']);
    const { key } = await mintKey(db.url, { tenantId: 'retry-crash', scopes: ['webhooks:write', 'audit:read'] });
    const target = await receiver();
    target.reply(503);
    const endpointId = await register(api.baseUrl, key, target.url);
    let worker = await startProcess('worker', api.busNamespace);
    const event = newEvent({ tenantId: 'retry-crash' });
    await seedEvents(db.url, [event]);
    const delivery = async () =>
      (await db.pool.query(`SELECT 'dlv_' || id AS id, state, attempts FROM deliveries WHERE endpoint_id = $1`, [endpointId])).rows[0];
    await waitFor(async () => (await delivery())?.attempts === 1, 'the first attempt');

    // The retry's request hangs until its worker is dead: it dies with the attempt on the wire.
    target.reply('hang');
    const retried = await call(`${api.baseUrl}/audit/webhooks/${endpointId}/deliveries/${(await delivery()).id}/retry`, {
      key,
      method: 'POST',
    });
    expect(retried.status, retried.text).to.equal(202);
    await waitFor(() => target.received.length === 2, 'the retry on the wire');
    await kill(worker);
    target.reply(204);
    worker = await startProcess('worker', api.busNamespace);
    await waitFor(async () => (await delivery()).state === 'succeeded', 'the retry made by the next worker', 30_000);
    expect((await delivery()).attempts).to.equal(2);
    const { rows } = await db.pool.query('SELECT consecutive_failures FROM webhook_endpoints WHERE id = $1', [endpointId]);
    expect(rows[0].consecutive_failures).to.equal(0);
    expect(target.received.slice(1).every((received) => received.headers['x-service-delivery-attempt'] === '2')).to.equal(true);
    await kill(worker);
    // Its relay would share the next test's outbox.
    await api.stop();
  });

  it('continues a replay whose process was killed from where it stopped, no event skipped or doubled', async () => {
    const namespace = `t${Date.now().toString(36)}`;
    // The api and the worker run here; replays run in relay processes of their own.
    const api = await service(['api', 'worker'], namespace);
    const tenantId = 'replay-crash';
    const { key } = await mintKey(db.url, { tenantId, scopes: ['webhooks:write', 'audit:read'] });
    const start = Date.now() - 5 * DAY_MS;
    // Many events in few milliseconds: the position must tell apart events of one millisecond.
    const events = Array.from({ length: 4000 }, (_, index) => newEvent({ tenantId, occurredAtMs: start + Math.floor(index / 7) }));
    await seedEvents(db.url, events);
    const target = await receiver();
    // Slow enough that the replay is still running when its process is killed.
    target.reply({ status: 204, delayMs: 20 });
    const endpointId = await register(api.baseUrl, key, target.url);

    let relay = await startProcess('relay', namespace);
    const started = await call(`${api.baseUrl}/audit/webhooks/${endpointId}/replay`, {
      key,
      body: { since: new Date(start).toISOString(), until: new Date().toISOString() },
    });
    expect(started.status, started.text).to.equal(202);
    const progress = async () =>
      (await call(`${api.baseUrl}/audit/webhooks/${endpointId}/replays/${started.json.replay.id}`, { key })).json.replay;
    await waitFor(async () => (await progress()).deliveries_created >= 1000, 'the replay under way', 30_000);
    await kill(relay);
    const atKill = await progress();
    expect(atKill.status).to.equal('running');
    expect(atKill.deliveries_created).to.be.below(4000);

    relay = await startProcess('relay', namespace);
    await waitFor(async () => (await progress()).status === 'completed', 'the replay to complete after the restart', 60_000);
    expect(await progress()).to.include({ events_matched: 4000, deliveries_created: 4000 });
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS deliveries, count(DISTINCT event_id)::int AS events FROM deliveries WHERE endpoint_id = $1`,
      [endpointId],
    );
    expect(rows[0]).to.deep.equal({ deliveries: 4000, events: 4000 });
    await waitFor(
      async () =>
        (await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1 AND state = 'succeeded'`, [endpointId]))
          .rows[0].n === 4000,
      'every replayed delivery to succeed',
      60_000,
    );
    const received = new Set(target.received.map((delivery) => delivery.json().id as string));
    expect(events.every((event) => received.has(event.eventId))).to.equal(true);
    await kill(relay);
  });
});
