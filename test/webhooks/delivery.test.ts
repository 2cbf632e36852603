import { expect } from 'chai';
import { createHmac, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhookSignature } from '../../src/client/index.ts';
import { DELIVERIES_PENDING_CHANNEL } from '../../src/delivery/relayWakeUp.ts';
import { deleteEndpoint } from '../../src/webhooks/webhookStore.ts';
import { deleteEndpointDeliveries } from '../../src/delivery/endpointDeliveries.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';
import { insertEndpointRow } from '../support/webhookEndpoints.ts';

// Retries a few hundred milliseconds apart instead of minutes apart; everything else as in production.
const FAST_RETRIES = { DELIVERY_SCHEDULE: '200ms,200ms,200ms,200ms', DELIVERY_RELAY_POLL_MS: '50' };

describe('webhook delivery', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  const receivers: TestReceiver[] = [];
  let tenantCounter = 0;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'relay', 'worker'],
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', ...FAST_RETRIES },
    });
  });

  after(async () => {
    await service?.stop();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await db?.drop();
  });

  /** A tenant of its own for each test, so counters and trails never mix. */
  async function freshTenant() {
    tenantCounter += 1;
    const tenantId = `hooks-${tenantCounter}`;
    const { key } = await mintKey(db.url, { tenantId, scopes: ['audit:read', 'webhooks:write'] });
    return { tenantId, key };
  }

  async function receiver(reply: Parameters<typeof startReceiver>[0] = 204): Promise<TestReceiver> {
    const started = await startReceiver(reply);
    receivers.push(started);
    return started;
  }

  async function register(key: string, url: string, eventFilter: string[] = []): Promise<{ id: string; secret: string }> {
    const response = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url, event_filter: eventFilter } });
    expect(response.status, response.text).to.equal(201);
    return { id: response.json.endpoint.id, secret: response.json.secret };
  }

  async function endpointRow(id: string) {
    const { rows } = await db.pool.query(
      'SELECT active, disabled_reason, consecutive_failures, last_delivery_at FROM webhook_endpoints WHERE id = $1',
      [id],
    );
    return rows[0];
  }

  async function deliveryStates(endpointId: string): Promise<string[]> {
    const { rows } = await db.pool.query('SELECT state FROM deliveries WHERE endpoint_id = $1 ORDER BY id', [endpointId]);
    return rows.map((row) => row.state);
  }

  /**
   * The sentinel for "nothing more was sent": an event written now, for an endpoint and receiver of its own
   * that refuse its first three attempts, so that it is delivered three retry delays after it was written.
   * The relay publishes deliveries in the order they fall due, so anything already due or retrying before
   * it (one retry delay at most) has been sent by the time it arrives.
   */
  async function awaitSentinel(tenantId: string, key: string): Promise<void> {
    const sentinel = await receiver(503);
    sentinel.reply((delivery) => (delivery.headers['x-service-delivery-attempt'] === '4' ? 204 : 503));
    await register(key, sentinel.url, ['sentinel.']);
    await seedEvents(db.url, [newEvent({ tenantId, action: 'sentinel.check' })]);
    await waitFor(() => sentinel.received.length === 4, 'the sentinel delivery, on its fourth attempt', 20_000);
  }

  it('signs the documented envelope so that an independent HMAC and verifyWebhookSignature both accept it', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver();
    const { secret } = await register(key, target.url, ['phi.']);
    const event = newEvent({
      tenantId,
      action: 'phi.read',
      details: '{"reason":"chart review","nested":{"ids":[1,2]}}',
      resourceType: 'claim',
      resourceId: 'c-7',
    });
    await seedEvents(db.url, [event]);
    await waitFor(() => target.received.length === 1, 'the delivery');
    const delivery = target.received[0]!;

    const header = String(delivery.headers['x-service-signature']);
    const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
    expect(match, header).not.to.equal(null);
    const independent = createHmac('sha256', secret).update(`t=${match![1]}.`).update(delivery.rawBody).digest('hex');
    expect(match![2]).to.equal(independent);
    expect(Math.abs(Number(match![1]) - Date.now() / 1000)).to.be.below(10);
    expect(verifyWebhookSignature(secret, header, delivery.rawBody)).to.deep.include({ valid: true });
    expect(verifyWebhookSignature('0'.repeat(64), header, delivery.rawBody)).to.deep.equal({ valid: false, reason: 'signature_mismatch' });

    expect(delivery.headers['content-type']).to.equal('application/json');
    expect(delivery.headers['x-service-event-id']).to.equal(event.eventId);
    expect(delivery.headers['x-service-delivery-attempt']).to.equal('1');
    expect(delivery.headers['user-agent']).to.match(/^audit-trail-webhooks\/\d+\.\d+\.\d+/);

    const envelope = delivery.json();
    expect(envelope).to.deep.equal({
      type: 'phi.read',
      id: event.eventId,
      timestamp: new Date(event.occurredAtMs).toISOString(),
      tenant_id: tenantId,
      actor: { user_id: event.userId, user_role: event.userRole },
      resource: { type: 'claim', id: 'c-7' },
      phi_involved: true,
      success: true,
      details: { reason: 'chart review', nested: { ids: [1, 2] } },
      schema_version: '1',
    });
    await waitFor(
      async () => (await deliveryStates((await endpointRowsOf(tenantId))[0]!))[0] === 'succeeded',
      'the delivery recorded as succeeded',
    );
  });

  async function endpointRowsOf(tenantId: string): Promise<string[]> {
    const { rows } = await db.pool.query('SELECT id FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at', [tenantId]);
    return rows.map((row) => row.id);
  }

  it('delivers two stored events that share an id but not a timestamp, each once (idempotency is on both)', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver();
    const { id } = await register(key, target.url, ['phi.']);
    const first = newEvent({ tenantId, occurredAtMs: Date.now() - 60_000 });
    const second = { ...first, occurredAtMs: first.occurredAtMs + 1 };
    await seedEvents(db.url, [first, second]);
    // A repeat of the first is a producer's retry: stored once, delivered once.
    await seedEvents(db.url, [first]);
    // Deliveries are recorded with the events they belong to: a third delivery would exist by now.
    expect(await deliveryStates(id)).to.have.length(2);
    await waitFor(async () => (await deliveryStates(id)).every((state) => state === 'succeeded'), 'both deliveries');
    const timestamps = target.received.map((delivery) => delivery.json().timestamp).sort();
    expect(timestamps).to.deep.equal([new Date(first.occurredAtMs).toISOString(), new Date(second.occurredAtMs).toISOString()]);
  });

  it('matches every documented filter example, at the time the event is written', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver();
    // The empty filter also matches the admin.webhook.create events of its own and later registrations.
    const everything = await register(key, `${target.url}?all`, []);
    const phiFamily = await register(key, `${target.url}?phi`, ['phi.']);
    const phiReadOnly = await register(key, `${target.url}?phi-read`, ['phi.read']);
    const phiAndAdmin = await register(key, `${target.url}?phi-admin`, ['phi.', 'admin.']);
    const actions = ['phi.read', 'phi.query', 'phi.export', 'phi.decrypt', 'phi.reader', 'admin.key.create', 'auth.login'];
    await seedEvents(
      db.url,
      actions.map((action) => newEvent({ tenantId, action })),
    );

    const expected: Record<string, string[]> = {
      [everything.id]: [...actions, ...Array(4).fill('admin.webhook.create')],
      [phiFamily.id]: ['phi.read', 'phi.query', 'phi.export', 'phi.decrypt', 'phi.reader'],
      [phiReadOnly.id]: ['phi.read'],
      [phiAndAdmin.id]: ['phi.read', 'phi.query', 'phi.export', 'phi.decrypt', 'phi.reader', 'admin.key.create', 'admin.webhook.create'],
    };
    const total = Object.values(expected).reduce((sum, list) => sum + list.length, 0);
    await waitFor(async () => {
      const { rows } = await db.pool.query(
        `SELECT count(*) FILTER (WHERE state = 'succeeded')::int AS done, count(*)::int AS n FROM deliveries WHERE tenant_id = $1`,
        [tenantId],
      );
      return rows[0].n === total && rows[0].done === total;
    }, `${total} deliveries`);
    expect(target.received).to.have.length(total);
    const { rows } = await db.pool.query(
      `SELECT d.endpoint_id, e.action FROM deliveries d JOIN events e ON e.event_id = d.event_id WHERE d.tenant_id = $1`,
      [tenantId],
    );
    for (const [endpointId, wanted] of Object.entries(expected)) {
      const got = rows.filter((row) => row.endpoint_id === endpointId).map((row) => row.action);
      expect(got.sort(), endpointId).to.deep.equal([...wanted].sort());
    }
  });

  it('does not deliver events written before the endpoint existed', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver();
    await seedEvents(db.url, [newEvent({ tenantId })]);
    const { id } = await register(key, target.url, ['phi.']);
    expect(await deliveryStates(id)).to.deep.equal([]);
    // An event written after the registration is delivered, and it alone.
    const later = newEvent({ tenantId });
    await seedEvents(db.url, [later]);
    await waitFor(() => target.received.length >= 1, 'the later event');
    expect(target.received.map((delivery) => delivery.json().id)).to.deep.equal([later.eventId]);
  });

  it('makes exactly 5 attempts for an always-failing receiver, then none, and counts one failed delivery', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver(500);
    const { id } = await register(key, target.url, ['phi.']);
    await seedEvents(db.url, [newEvent({ tenantId })]);
    await waitFor(async () => (await deliveryStates(id))[0] === 'failed', 'the delivery to go terminal');
    await awaitSentinel(tenantId, key);
    expect(target.received).to.have.length(5);
    expect(target.received.map((delivery) => delivery.headers['x-service-delivery-attempt'])).to.deep.equal(['1', '2', '3', '4', '5']);
    // Byte-stable across redeliveries: only the signature changes.
    expect(new Set(target.received.map((delivery) => delivery.rawBody.toString())).size).to.equal(1);
    const attempts = await db.pool.query(
      `SELECT a.attempt, a.status_code, a.duration_ms FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1 ORDER BY a.attempt`,
      [id],
    );
    expect(attempts.rows.map((row) => [row.attempt, row.status_code])).to.deep.equal([
      [1, 500],
      [2, 500],
      [3, 500],
      [4, 500],
      [5, 500],
    ]);
    const endpoint = await endpointRow(id);
    expect(endpoint.consecutive_failures).to.equal(1);
    expect(endpoint.active).to.equal(true);
    expect(endpoint.last_delivery_at).to.be.an.instanceOf(Date);
    const listed = await call(`${service.baseUrl}/audit/webhooks`, { key });
    expect(listed.json.endpoints[0]).to.include({ consecutive_failures: 1 });
    expect(Date.parse(listed.json.endpoints[0].last_delivery_at)).to.be.closeTo(Date.now(), 10_000);
  });

  it('succeeds on a later attempt, and a success resets consecutive_failures', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver(503);
    const { id } = await register(key, target.url, ['phi.']);
    await seedEvents(db.url, [newEvent({ tenantId }), newEvent({ tenantId })]);
    await waitFor(async () => (await endpointRow(id)).consecutive_failures === 2, 'two failed deliveries');
    // Third delivery: fails twice, then the receiver recovers.
    target.reply((delivery) => (delivery.headers['x-service-delivery-attempt'] === '3' ? 204 : 503));
    await seedEvents(db.url, [newEvent({ tenantId })]);
    await waitFor(async () => (await deliveryStates(id)).includes('succeeded'), 'the third delivery to succeed');
    expect((await endpointRow(id)).consecutive_failures).to.equal(0);
  });

  it('publishes a delivery made due with a due time long past within about a second (the relay floor)', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver(204);
    const { id } = await register(key, target.url, ['phi.']);
    await seedEvents(db.url, [newEvent({ tenantId })]);
    await waitFor(async () => (await deliveryStates(id))[0] === 'succeeded', 'the first delivery recorded');
    // As a delivery of a transaction that began before the relay's last full pass, or one another relay put
    // back: due long before the floor its quick passes start from, with a notification that does not say so.
    const madeDueAt = Date.now();
    await db.pool.query(
      `UPDATE deliveries SET state = 'pending', completed_at = NULL, due_at = now() - interval '1 hour' WHERE endpoint_id = $1`,
      [id],
    );
    await db.pool.query('SELECT pg_notify($1, $2)', [DELIVERIES_PENDING_CHANNEL, '']);
    await waitFor(() => target.received.length === 2, 'the delivery made due again', 5_000);
    expect(target.received[1]!.headers['x-service-delivery-attempt']).to.equal('2');
    expect(target.received[1]!.receivedAt - madeDueAt).to.be.below(2_500);
  });

  it('treats a redirect as a failure without following it, and keeps at most 1 KiB of the response', async () => {
    const { tenantId, key } = await freshTenant();
    const elsewhere = await receiver(204);
    const target = await receiver({ status: 307, headers: { location: elsewhere.url }, body: 'x'.repeat(10_000) });
    const { id } = await register(key, target.url, ['phi.']);
    await seedEvents(db.url, [newEvent({ tenantId })]);
    await waitFor(async () => (await deliveryStates(id))[0] === 'failed', 'the delivery to fail');
    expect(elsewhere.received).to.have.length(0);
    const attempts = await db.pool.query(
      `SELECT a.status_code, length(a.response_excerpt) AS excerpt FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1`,
      [id],
    );
    expect(attempts.rows).to.have.length(5);
    for (const row of attempts.rows) expect(row).to.deep.equal({ status_code: 307, excerpt: 1024 });
  });

  it('disables an endpoint at its 10th consecutive failed delivery, records why, and delivers nothing after', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver(500);
    const { id } = await register(key, target.url, ['phi.']);
    await seedEvents(
      db.url,
      Array.from({ length: 10 }, () => newEvent({ tenantId, action: 'phi.read' })),
    );
    await waitFor(async () => (await endpointRow(id)).active === false, 'auto-disable', 30_000);
    const endpoint = await endpointRow(id);
    expect(endpoint).to.include({ disabled_reason: 'auto', consecutive_failures: 10 });
    expect(target.received).to.have.length(50);
    const trail = await call(`${service.baseUrl}/audit/events?action=admin.webhook.auto_disable`, { key });
    expect(trail.json.events).to.have.length(1);
    expect(trail.json.events[0]).to.include({ resource_id: id, user_role: 'system' });

    await seedEvents(db.url, [newEvent({ tenantId, action: 'phi.read' })]);
    expect(await deliveryStates(id)).to.have.length(10);
    await awaitSentinel(tenantId, key);
    expect(target.received).to.have.length(50);
  });

  it('stops pending retries when the endpoint is disabled', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver(500);
    const { id } = await register(key, target.url, ['phi.']);
    await seedEvents(db.url, [newEvent({ tenantId })]);
    await waitFor(() => target.received.length >= 1, 'the first attempt');
    const disabled = await call(`${service.baseUrl}/audit/webhooks/${id}/disable`, { key, method: 'POST' });
    expect(disabled.status).to.equal(200);
    const attemptsAtDisable = target.received.length;
    await waitFor(async () => (await deliveryStates(id))[0] === 'cancelled', 'the pending retry to be cancelled');
    await awaitSentinel(tenantId, key);
    expect(target.received.length).to.be.at.most(attemptsAtDisable + 1); // one attempt may already be on the wire
    expect(await deliveryStates(id)).to.deep.equal(['cancelled']);
  });

  it('stops pending retries when the endpoint is deleted, and deletes its history', async () => {
    const { tenantId, key } = await freshTenant();
    const target = await receiver(500);
    const { id } = await register(key, target.url, ['phi.']);
    await seedEvents(db.url, [newEvent({ tenantId })]);
    await waitFor(() => target.received.length >= 1, 'the first attempt');
    expect((await call(`${service.baseUrl}/audit/webhooks/${id}`, { key, method: 'DELETE' })).status).to.equal(204);
    const attemptsAtDelete = target.received.length;
    await awaitSentinel(tenantId, key);
    expect(target.received.length).to.be.at.most(attemptsAtDelete + 1);
    const left = await db.pool.query(
      `SELECT (SELECT count(*) FROM deliveries WHERE endpoint_id = $1)::int AS deliveries,
              (SELECT count(*) FROM delivery_attempts a WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = a.delivery_id))::int AS orphans`,
      [id],
    );
    expect(left.rows[0]).to.deep.equal({ deliveries: 0, orphans: 0 });
  });

  it('stores an event written while its endpoint is being deleted, and leaves no delivery of it behind', async () => {
    const { tenantId, key } = await freshTenant();
    const { id } = await register(key, (await receiver()).url, ['phi.']);
    const deleting = await db.pool.connect();
    try {
      await deleting.query('BEGIN');
      // What a deletion holds from its first statement on (webhookRegistry.delete locks the endpoint).
      await deleting.query('SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR UPDATE', [id]);
      let written = false;
      const writing = seedEvents(db.url, [newEvent({ tenantId })]).then(() => (written = true));
      await waitFor(async () => {
        const { rows } = await db.pool.query(
          `SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows[0].waiting > 0;
      }, 'the write to wait on the endpoint being deleted');
      expect(written).to.equal(false);
      // What webhookRegistry.delete does next.
      await deleteEndpoint(deleting, id);
      await deleteEndpointDeliveries(deleting, id);
      await deleting.query('COMMIT');
      await writing;
    } finally {
      deleting.release();
    }
    const { rows } = await db.pool.query(
      `SELECT (SELECT count(*) FROM events WHERE tenant_id = $1 AND action = 'phi.read')::int AS events,
              (SELECT count(*) FROM deliveries WHERE tenant_id = $1)::int AS deliveries`,
      [tenantId],
    );
    expect(rows[0]).to.deep.equal({ events: 1, deliveries: 0 });
  });

  it('keeps running when an endpoint secret does not open with its key, and attempts nothing for that endpoint', async () => {
    const { tenantId } = await freshTenant();
    const unreadable = await receiver();
    const id = `wh_${randomBytes(16).toString('hex')}`;
    // Sealed under another SECRET_ENCRYPTION_KEY, as after a key rotation that missed this row.
    await insertEndpointRow(db.pool, { id, tenantId, url: unreadable.url, encryptionKey: 'cd'.repeat(32) });
    const other = await freshTenant();
    const healthy = await receiver();
    await register(other.key, healthy.url, ['phi.']);
    await seedEvents(db.url, [newEvent({ tenantId }), newEvent({ tenantId: other.tenantId })]);
    await waitFor(() => healthy.received.length >= 1, 'the healthy delivery');
    await waitFor(async () => {
      const { rows } = await db.pool.query(
        `SELECT published_at IS NULL AND due_at > now() AS deferred FROM deliveries WHERE endpoint_id = $1`,
        [id],
      );
      return rows[0]?.deferred === true;
    }, 'the unreadable delivery to be put back for later');
    expect(unreadable.received).to.have.length(0);
    const { rows } = await db.pool.query(
      `SELECT d.state, d.attempts, (SELECT count(*)::int FROM delivery_attempts a WHERE a.delivery_id = d.id) AS records
       FROM deliveries d WHERE d.endpoint_id = $1`,
      [id],
    );
    expect(rows).to.deep.equal([{ state: 'pending', attempts: 0, records: 0 }]);
    // The worker is still there for everyone else.
    await seedEvents(db.url, [newEvent({ tenantId: other.tenantId })]);
    await waitFor(() => healthy.received.length >= 2, 'a later delivery to the healthy endpoint');
  });

  it('keeps delivering to a healthy endpoint within 1 s while a hung one has 2,000 deliveries pending @latency', async function () {
    this.timeout(60_000);
    const hungTenant = await freshTenant();
    const hung = await receiver('hang');
    await register(hungTenant.key, hung.url, ['phi.']);
    await seedEvents(
      db.url,
      Array.from({ length: 2_000 }, () => newEvent({ tenantId: hungTenant.tenantId })),
    );
    await waitFor(() => hung.received.length >= 16, 'the hung receiver to hold its connections');

    const healthyTenant = await freshTenant();
    const healthy = await receiver(204);
    await register(healthyTenant.key, healthy.url, ['phi.']);
    const latencies: number[] = [];
    for (let round = 0; round < 5; round += 1) {
      const written = Date.now();
      await seedEvents(db.url, [newEvent({ tenantId: healthyTenant.tenantId })]);
      await waitFor(() => healthy.received.length === round + 1, 'the healthy delivery', 5_000, 5);
      latencies.push(healthy.received[round]!.receivedAt - written);
    }
    expect(Math.max(...latencies), `latencies ${latencies.join(', ')} ms`).to.be.below(1_000);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS pending FROM deliveries WHERE tenant_id = $1 AND state IN ('pending', 'parked')`,
      [hungTenant.tenantId],
    );
    expect(rows[0].pending).to.be.greaterThan(1_900);
  });
});

describe('webhook delivery with the SSRF guard on', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let service: TestService;
  let target: TestReceiver;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['relay', 'worker'],
      env: { WEBHOOK_ALLOW_HTTP: 'true', ...FAST_RETRIES },
    });
    target = await startReceiver(204);
  });

  after(async () => {
    await service?.stop();
    await target?.close();
    await db?.drop();
  });

  it('refuses to connect to a private address at delivery time, even for a row that got past registration', async () => {
    // As if the name had resolved to a public address at registration and to loopback now.
    const id = `wh_${'a'.repeat(32)}`;
    await insertEndpointRow(db.pool, { id, tenantId: 'ssrf', url: target.url.replace('127.0.0.1', 'localhost') });
    await seedEvents(db.url, [newEvent({ tenantId: 'ssrf' })]);
    await waitFor(async () => {
      const { rows } = await db.pool.query(`SELECT state FROM deliveries WHERE endpoint_id = $1`, [id]);
      return rows[0]?.state === 'failed';
    }, 'the delivery to fail');
    expect(target.received).to.have.length(0);
    const { rows } = await db.pool.query(`SELECT DISTINCT error FROM delivery_attempts`);
    expect(rows.map((row) => row.error)).to.have.length(1);
    // Neither the address the name resolved to nor its range: a tenant must not map the inside's DNS.
    expect(rows[0].error).to.equal('target refused: host is not a public address');
  });
});

describe('webhook delivery time limit', function () {
  this.timeout(30_000);
  const LIMIT_MS = 600;
  let db: TestDatabase;
  let service: TestService;
  const servers: Server[] = [];

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['relay', 'worker'],
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_TIMEOUT_MS: String(LIMIT_MS), ...FAST_RETRIES },
    });
  });

  after(async () => {
    await service?.stop();
    for (const server of servers) server.closeAllConnections();
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    await db?.drop();
  });

  /** A receiver answering with `handler`; returns its URL. */
  async function serve(handler: (response: ServerResponse) => void): Promise<string> {
    const server = createServer((request, response) => request.resume().on('end', () => handler(response)));
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  }

  async function firstAttempt(tenantId: string, url: string) {
    await insertEndpointRow(db.pool, { id: `wh_${randomBytes(16).toString('hex')}`, tenantId, url });
    await seedEvents(db.url, [newEvent({ tenantId })]);
    let attempt: { duration_ms: number; status_code: number | null; error: string | null } | undefined;
    await waitFor(async () => {
      const { rows } = await db.pool.query(
        `SELECT a.duration_ms, a.status_code, a.error FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
         WHERE d.tenant_id = $1 AND a.attempt = 1`,
        [tenantId],
      );
      attempt = rows[0];
      return attempt !== undefined;
    }, 'the first attempt to be recorded');
    return attempt!;
  }

  it('gives up on a receiver that never answers once the time limit has passed, and records a timeout', async () => {
    const attempt = await firstAttempt('limit-silent', await serve(() => undefined));
    expect(attempt.status_code).to.equal(null);
    expect(attempt.error).to.match(/^timeout: no complete response within 600 ms/);
    expect(attempt.duration_ms).to.be.within(LIMIT_MS, LIMIT_MS + 500);
  });

  it('counts the time limit to the end of the response: a body trickling in cannot hold the attempt open', async () => {
    const url = await serve((response) => {
      response.writeHead(200, { 'content-type': 'text/plain' });
      // A byte every 100 ms: never idle long enough for a per-read timeout, never finished.
      const drip = setInterval(() => response.write('.'), 100);
      response.on('close', () => clearInterval(drip));
    });
    const attempt = await firstAttempt('limit-trickle', url);
    expect(attempt.error).to.match(/^timeout/);
    expect(attempt.duration_ms).to.be.within(LIMIT_MS, LIMIT_MS + 500);
  });
});

describe('webhook retry timing', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let target: TestReceiver;

  before(async () => {
    db = await createTestDatabase();
    // A one-second schedule and the default relay poll (30 s): a retry must not wait for the poll, since the
    // relay sleeps until the next due time.
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['relay', 'worker'],
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_SCHEDULE: '1s' },
    });
    // Attempt 1 fails and attempt 2 succeeds: no delivery fails, so the endpoint is never auto-disabled.
    target = await startReceiver();
    target.reply((delivery) => (delivery.headers['x-service-delivery-attempt'] === '1' ? 503 : 204));
  });

  after(async () => {
    await service?.stop();
    await target?.close();
    await db?.drop();
  });

  it('keeps a one-second retry within its ±20 % jitter rather than rounding it up to the relay poll @latency', async () => {
    const id = `wh_${'b'.repeat(32)}`;
    await insertEndpointRow(db.pool, { id, tenantId: 'timing', url: target.url });
    const events = Array.from({ length: 12 }, () => newEvent({ tenantId: 'timing' }));
    await seedEvents(db.url, events);
    await waitFor(() => target.received.length === 24, 'two attempts of each of the 12 deliveries', 20_000);
    const arrivals = new Map<string, number[]>();
    for (const delivery of target.received) {
      const eventId = String(delivery.headers['x-service-event-id']);
      arrivals.set(eventId, [...(arrivals.get(eventId) ?? []), delivery.receivedAt]);
    }
    // From the first attempt's arrival: the delay (800-1,200 ms) plus the time to record the outcome and
    // to hand the retry to the worker, tens of milliseconds; waiting for the poll would add up to 30 s.
    const gaps = [...arrivals.values()].map(([first, second]) => second! - first!);
    expect(
      gaps.filter((gap) => gap < 790 || gap > 1_450),
      `gaps ${gaps.join(', ')} ms`,
    ).to.deep.equal([]);
  });

  it('starts a retry within 50 ms of its due time, though the relay polls only every 30 s @latency', async () => {
    const id = `wh_${'c'.repeat(32)}`;
    await insertEndpointRow(db.pool, { id, tenantId: 'idle', url: target.url });
    const events = Array.from({ length: 3 }, () => newEvent({ tenantId: 'idle' }));
    await seedEvents(db.url, events);
    // Attempt 1 fails at once (the write woke the relay); its outcome sets the retry's due time.
    const dueAt = new Map<string, number>();
    await waitFor(
      async () => {
        const { rows } = await db.pool.query(
          `SELECT event_id::text, due_at FROM deliveries WHERE endpoint_id = $1 AND attempts = 1 AND state = 'pending'`,
          [id],
        );
        for (const row of rows) dueAt.set(row.event_id, row.due_at.getTime());
        return dueAt.size === events.length;
      },
      'three deliveries waiting for their retry',
      10_000,
      5,
    );
    // The receiver is the jitter test's too: only this test's events count.
    const ours = () => target.received.filter((delivery) => dueAt.has(String(delivery.headers['x-service-event-id'])));
    await waitFor(() => ours().length === 2 * events.length, 'both attempts of each', 10_000);
    const lateness = ours()
      .filter((delivery) => delivery.headers['x-service-delivery-attempt'] === '2')
      .map((delivery) => delivery.receivedAt - dueAt.get(String(delivery.headers['x-service-event-id']))!);
    expect(
      lateness.every((ms) => ms >= 0 && ms <= 50),
      `received ${lateness.join(', ')} ms after due`,
    ).to.equal(true);
  });
});
