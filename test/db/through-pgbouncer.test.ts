import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { ConfigError } from '../../src/config/config.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';
import { PrivatePgBouncer } from '../support/private-pgbouncer.ts';
import { PrivatePostgres } from '../support/private-services.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { TEST_INGEST_TOKEN, call, mintKey, startTestService, testConfig, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * The service behind a real PgBouncer 1.18 in transaction mode (the Debian package), with fewer server
 * connections than the service has clients, so that consecutive statements of one client run on different
 * server connections: named prepared statements and startup parameters, which PgBouncer 1.18 cannot carry,
 * would fail here. LISTEN and session advisory locks go to DATABASE_SESSION_URL, straight to Postgres.
 */
describe('behind PgBouncer in transaction mode', function () {
  this.timeout(120_000);
  let postgres: PrivatePostgres;
  let bouncer: PrivatePgBouncer;
  let db: TestDatabase;
  let receiver: TestReceiver;
  let service: TestService;

  before(async () => {
    postgres = await PrivatePostgres.start();
    db = await createTestDatabase(postgres.url);
    bouncer = await PrivatePgBouncer.start({ postgresPort: postgres.port, poolMode: 'transaction', poolSize: 2 });
    receiver = await startReceiver(204);
    service = await startTestService({
      databaseUrl: `${bouncer.url}/${db.name}`,
      roles: ['api', 'ingest', 'relay', 'worker'],
      env: {
        DATABASE_POOLER: 'transaction',
        DATABASE_SESSION_URL: db.url,
        DATABASE_POOL_SIZE: '6',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        DELIVERY_RELAY_POLL_MS: '100',
      },
    });
  });

  after(async () => {
    await service?.stop();
    await receiver?.close();
    await db?.pool.end();
    await bouncer?.remove();
    await postgres?.remove();
  });

  it('ingests, lists, looks up, exports and delivers webhooks, every statement through shared server connections', async () => {
    const tenantId = 'pooled';
    const { key } = await mintKey(db.url, { tenantId, scopes: ['audit:read', 'audit:export', 'webhooks:write'] });
    const registered = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url: receiver.url, event_filter: ['phi.'] } });
    expect(registered.status).to.equal(201);

    const batches = Array.from({ length: 12 }, () =>
      Array.from({ length: 5 }, () => producerEvent({ tenant_id: tenantId, event_id: randomUUID(), timestamp: new Date().toISOString() })),
    );
    const ingested = await Promise.all(
      batches.map((events) =>
        call(`${service.internalUrl}/internal/v1/events`, { headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` }, body: { events } }),
      ),
    );
    expect(ingested.map((response) => response.status)).to.deep.equal(batches.map(() => 200));
    const ids = batches.flat().map((event) => event.event_id as string);

    // The same statements many times over, concurrently: a name prepared on one server connection and run on
    // another would fail with 26000 (prepared statement does not exist).
    const lists = await Promise.all(
      Array.from({ length: 24 }, (_, index) =>
        call(`${service.baseUrl}/audit/events?limit=${10 + (index % 3)}${index % 2 ? '&action=phi.read' : ''}`, { key }),
      ),
    );
    expect(lists.map((response) => response.status)).to.deep.equal(lists.map(() => 200));
    const lookups = await Promise.all(ids.map((id) => call(`${service.baseUrl}/audit/events/${id}`, { key })));
    expect(lookups.map((response) => response.status)).to.deep.equal(ids.map(() => 200));

    const exported = await call(`${service.baseUrl}/audit/export?format=json`, { key, body: { action: 'phi.read' } });
    expect(exported.status).to.equal(200);
    expect(exported.json.count).to.equal(ids.length);

    await waitFor(
      () => new Set(receiver.received.map((delivery) => delivery.json().id)).size === ids.length,
      'every webhook delivered',
      30_000,
    );

    // And the statements did go through PgBouncer: its own count of transactions for the test database.
    const admin = new pg.Client({ connectionString: `${bouncer.url}/pgbouncer` });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ database: string; total_xact_count: string }>('SHOW STATS');
      const served = Number(rows.find((row) => row.database === db.name)?.total_xact_count ?? 0);
      expect(served).to.be.greaterThan(ids.length + lists.length);
    } finally {
      await admin.end();
    }
  });

  it('runs a replay under its session advisory lock on DATABASE_SESSION_URL, and leaves no lock behind', async () => {
    const tenantId = 'pooled-replay';
    const { key } = await mintKey(db.url, { tenantId, scopes: ['audit:read', 'webhooks:write'] });
    const events = Array.from({ length: 20 }, () =>
      producerEvent({ tenant_id: tenantId, event_id: randomUUID(), timestamp: new Date().toISOString() }),
    );
    const ingested = await call(`${service.internalUrl}/internal/v1/events`, {
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
      body: { events },
    });
    expect(ingested.status).to.equal(200);
    // An endpoint registered after the events: only a replay delivers them to it.
    const late = await startReceiver(204);
    try {
      const registered = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url: late.url, event_filter: ['phi.'] } });
      expect(registered.status).to.equal(201);
      const replay = await call(`${service.baseUrl}/audit/webhooks/${registered.json.endpoint.id}/replay`, {
        key,
        body: { since: new Date(Date.now() - 600_000).toISOString(), until: new Date(Date.now() + 1_000).toISOString() },
      });
      expect(replay.status).to.equal(202);
      const progress = `${service.baseUrl}${replay.headers.get('location')!.replace(/^.*\/audit\//, '/audit/')}`;
      await waitFor(async () => (await call(progress, { key })).json?.replay?.status === 'completed', 'the replay completed', 30_000, 100);
      await waitFor(
        () => new Set(late.received.map((delivery) => delivery.json().id)).size === events.length,
        'the replayed deliveries',
        30_000,
      );
      // The claim was taken and given back on one session: no advisory lock is left on any server connection
      // (through PgBouncer the unlock could run on another one, and the lock would stay for good).
      const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'`);
      expect(rows[0]!.n).to.equal(0);
      // And it was the session pool's connection, straight to Postgres (PgBouncer's are the main pool's).
      const sessions = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'audit-trail % sessions' AND datname = $1`,
        [db.name],
      );
      expect(sessions.rows[0]!.n).to.be.greaterThan(0);
    } finally {
      await late.close();
    }
  });

  it('refuses DATABASE_POOLER=transaction without a DATABASE_SESSION_URL, naming the variable', () => {
    expect(() => testConfig(`${bouncer.url}/${db.name}`, { DATABASE_POOLER: 'transaction' }))
      .to.throw(ConfigError)
      .with.property('variable', 'DATABASE_SESSION_URL');
  });
});
