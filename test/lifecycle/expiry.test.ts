import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { checkIntegrity } from '../../src/integrity/integrityCheck.ts';
import { Expiry } from '../../src/lifecycle/expiry.ts';
import { LegalHolds } from '../../src/lifecycle/legalHolds.ts';
import { RetentionPolicies } from '../../src/lifecycle/retentionPolicies.ts';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import { ServiceMetrics } from '../../src/platform/metrics.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, testLogger, type TestService } from '../support/service.ts';
import { expiryMetrics } from '../../src/lifecycle/expiryMetrics.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const OPERATOR = { userId: 'test-operator', userRole: 'operator' };

/**
 * Expiry on real Postgres: a tenant with a 1-day policy and events over three days, a legal hold over the
 * second day, another tenant without a policy, an old month's partition; the one path the events table
 * allows, and the refusals around it; proofs and the integrity check of what expired.
 */
describe('expiry', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let database: Database;
  let sealer: TestSealer;
  let api: TestService;
  let policies: RetentionPolicies;
  let holds: LegalHolds;
  let expiry: Expiry;
  let metrics: ServiceMetrics;
  const now = Date.now();
  // Two months back from the start of this month: a partition old enough to be dropped once empty.
  const oldMonth = new Date(now);
  oldMonth.setUTCDate(1);
  oldMonth.setUTCMonth(oldMonth.getUTCMonth() - 3);
  oldMonth.setUTCHours(12, 0, 0, 0);
  const oldPartition = `events_${oldMonth.toISOString().slice(0, 7).replace('-', '_')}`;
  const acme = {
    day3: [
      newEvent({ tenantId: 'acme', occurredAtMs: now - 3 * DAY, action: 'phi.read' }),
      newEvent({ tenantId: 'acme', occurredAtMs: now - 3 * DAY + HOUR, action: 'admin.key.create' }),
    ],
    day2: [
      newEvent({ tenantId: 'acme', occurredAtMs: now - 2 * DAY, action: 'phi.read' }),
      newEvent({ tenantId: 'acme', occurredAtMs: now - 2 * DAY + HOUR, action: 'phi.export' }),
    ],
    today: [newEvent({ tenantId: 'acme', occurredAtMs: now - HOUR, action: 'phi.read' })],
    old: [newEvent({ tenantId: 'acme', occurredAtMs: oldMonth.getTime(), action: 'phi.read' })],
  };
  const initechOld = newEvent({ tenantId: 'initech', occurredAtMs: oldMonth.getTime() + HOUR, action: 'phi.read' });
  const globex = [
    newEvent({ tenantId: 'globex', occurredAtMs: now - 3 * DAY }),
    newEvent({ tenantId: 'globex', occurredAtMs: oldMonth.getTime() }),
  ];

  before(async () => {
    db = await createTestDatabase();
    database = new Database({ url: db.url, poolSize: 4, applicationName: 'test expiry', log: testLogger() });
    const writer = new EventWriter(database, WEBHOOK_FAN_OUT);
    policies = new RetentionPolicies({ db: database, writer, defaultPeriod: undefined });
    holds = new LegalHolds({ db: database, writer });
    metrics = new ServiceMetrics();
    expiry = new Expiry({ db: database, writer, policies, batchSize: 2, actor: OPERATOR, log: testLogger(), metrics });
    await seedEvents(db.url, [...acme.day3, ...acme.day2, ...acme.today, ...acme.old, initechOld, ...globex]);
    sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    await sealer.sealNow();
    const oneDay = parseRetentionPeriod('1d')!;
    for (const tenantId of ['acme', 'initech'])
      await policies.declare({ tenantId, period: oneDay, locked: false, archive: null }, `test:${tenantId}`, OPERATOR);
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
  });

  after(async () => {
    await api?.stop();
    await sealer?.close();
    await database?.close();
    await db?.drop();
  });

  const stored = async (tenant: string) =>
    (
      await database.pool.query('SELECT event_id::text FROM events WHERE tenant_id = $1 AND action NOT LIKE $2', [tenant, '%.retention.%'])
    ).rows
      .map((row) => row.event_id)
      .filter((id) => seeded.has(id))
      .sort();
  const seeded = new Set([...acme.day3, ...acme.day2, ...acme.today, ...acme.old, initechOld, ...globex].map((event) => event.eventId));
  const ids = (...events: Array<{ eventId: string }>) => events.map((event) => event.eventId).sort();
  const partitionExists = async () =>
    (await database.pool.query('SELECT to_regclass($1) IS NOT NULL AS present', [oldPartition])).rows[0].present;
  const refusal = async (sql: string, values: unknown[] = []) => {
    const client = await database.pool.connect();
    try {
      await client.query('BEGIN');
      return await client.query(sql, values).then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      );
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  };

  it('plans without removing: per tenant and month, what expires and what holds keep', async () => {
    await holds.place(
      {
        tenantId: 'acme',
        since: new Date(now - 2 * DAY - HOUR),
        until: new Date(now - 2 * DAY + 2 * HOUR),
        actionPrefixes: [],
        reason: 'r',
        reference: 'DAY-2',
      },
      'test:day2',
      OPERATOR,
    );
    await holds.place(
      { tenantId: 'initech', since: null, until: null, actionPrefixes: ['phi.'], reason: 'r', reference: 'INITECH' },
      'test:initech',
      OPERATOR,
    );
    const plans = await expiry.plan();
    const acmePlan = plans.find((plan) => plan.tenantId === 'acme')!;
    expect(acmePlan).to.include({ retain: '1d', source: 'policy' });
    expect(acmePlan.months.reduce((sum, month) => sum + month.expiring, 0)).to.equal(3);
    expect(acmePlan.months.reduce((sum, month) => sum + month.held, 0)).to.equal(2);
    expect(plans.find((plan) => plan.tenantId === 'globex')).to.include({ source: 'none', skipped: 'kept_forever' });
    expect(plans.find((plan) => plan.tenantId === 'initech')!.months.map((month) => month.held)).to.deep.equal([1]);
    expect(await stored('acme')).to.deep.equal(ids(...acme.day3, ...acme.day2, ...acme.today, ...acme.old));
  });

  it('removes exactly the expired, unheld events, in bounded batches, and records the run in the trail and metrics', async () => {
    const result = await expiry.run();
    expect(await stored('acme')).to.deep.equal(ids(...acme.day2, ...acme.today));
    expect(await stored('globex')).to.deep.equal(ids(...globex));
    expect(await stored('initech')).to.deep.equal(ids(initechOld));
    expect(result.tenants.find((tenant) => tenant.tenantId === 'acme')!.expired!.count).to.equal(3);
    // Three events in batches of two: two batches, each a row of the one path.
    expect((await database.pool.query(`SELECT count(*)::int AS n FROM expiry_batches WHERE tenant_id = 'acme'`)).rows[0].n).to.equal(2);
    const recorded = (
      await database.pool.query(`SELECT details FROM event_fields WHERE tenant_id = 'acme' AND action = 'audit.retention.expire'`)
    ).rows;
    expect(recorded).to.have.length(1);
    expect(JSON.parse(recorded[0].details)).to.include({
      retain: '1d',
      source: 'policy',
      count: 3,
      held: 2,
      first: new Date(acme.old[0]!.occurredAtMs).toISOString(),
    });
    expect((await expiryMetrics(metrics).eventsExpired.get()).values[0]!.value).to.equal(3);
    // initech's held event keeps its month's partition.
    expect(result.droppedPartitions).to.deep.equal([]);
    expect(await partitionExists()).to.equal(true);
  });

  it('refuses every other way out: a superuser DELETE, one with the setting forged, a batch newer than the policy, TRUNCATE', async () => {
    expect(
      (await database.pool.query('SELECT rolsuper FROM pg_roles WHERE rolname = current_user')).rows[0].rolsuper,
      'the test runs as a superuser',
    ).to.equal(true);
    expect(await refusal(`DELETE FROM events WHERE tenant_id = 'acme'`)).to.equal('42501');
    expect(await refusal(`DELETE FROM ${oldPartition}`)).to.equal('42501');
    expect(await refusal(`DELETE FROM events WHERE false`), 'even one that matches nothing').to.equal('42501');
    const lastBatch = (await database.pool.query('SELECT max(id)::text AS id FROM expiry_batches')).rows[0].id;
    const client = await database.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT set_config('audit_trail.applying_expiry', $1, true)`, [lastBatch]);
      const forged = await client.query(`DELETE FROM events WHERE tenant_id = 'acme'`).then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      );
      expect(forged).to.equal('42501');
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    expect(
      await refusal(
        `INSERT INTO expiry_batches (tenant_id, kept_since, retain, source, batch_limit, requested_by) VALUES ('acme', now(), '1d', 'policy', 10, 'psql')`,
      ),
    ).to.equal('42501');
    expect(await refusal('TRUNCATE events')).to.equal('42501');
    expect(await refusal('DELETE FROM expired_events')).to.equal('42501');
    expect(await stored('acme')).to.deep.equal(ids(...acme.day2, ...acme.today));
  });

  it('answers the proof of an expired event with 410 expired, and the integrity check counts it as expired, not missing', async () => {
    const { key } = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'] });
    const gone = await call(`${api.baseUrl}/audit/events/${acme.day3[0]!.eventId}/proof`, { key });
    expect(gone.status).to.equal(410);
    expect(gone.json).to.include({ error: 'expired', retain: '1d', source: 'policy' });
    expect(Date.parse(gone.json.expired_at)).to.be.within(now - HOUR, Date.now());
    const kept = await call(`${api.baseUrl}/audit/events/${acme.day2[0]!.eventId}/proof`, { key });
    expect(kept.status).to.equal(200);
    // Another tenant asking for the same id learns nothing.
    const { key: other } = await mintKey(db.url, { tenantId: 'globex', scopes: ['audit:read'] });
    expect((await call(`${api.baseUrl}/audit/events/${acme.day3[0]!.eventId}/proof`, { key: other })).status).to.equal(404);
    const [report] = await checkIntegrity(database, { tenantId: 'acme', sealIntervalMs: 3_600_000 });
    expect(report).to.include({ expired: 3, retained: 0 });
    expect(report!.problems).to.deep.equal([]);
  });

  it('keeps held events until the hold is released, then expires them; drops the old month once nothing in it is kept', async () => {
    await holds.release('test:day2', OPERATOR);
    await expiry.run('acme');
    expect(await stored('acme')).to.deep.equal(ids(...acme.today));
    expect(await partitionExists(), 'initech still holds an event there').to.equal(true);
    await holds.release('test:initech', OPERATOR);
    let result = await expiry.run();
    expect(await stored('initech')).to.deep.equal([]);
    // globex has no policy and no default applies: its events are kept forever, and so is the month they share.
    expect(await stored('globex')).to.deep.equal(ids(...globex));
    expect(result.droppedPartitions).to.deep.equal([]);
    expect(await partitionExists()).to.equal(true);

    await policies.declare(
      { tenantId: 'globex', period: parseRetentionPeriod('1d')!, locked: false, archive: null },
      'test:globex',
      OPERATOR,
    );
    result = await expiry.run();
    expect(await stored('globex')).to.deep.equal([]);
    expect(result.droppedPartitions).to.deep.equal([oldPartition]);
    expect(await partitionExists()).to.equal(false);
    // The current and previous months are never dropped, whatever they hold.
    expect((await database.pool.query('SELECT count(*)::int AS n FROM events')).rows[0].n).to.be.greaterThan(0);
  });

  it('expires an event stored again after it expired (a producer retry with the same id and time) without failing the pass', async () => {
    const again = acme.day3[0]!;
    await seedEvents(db.url, [again]);
    expect(await stored('acme')).to.include(again.eventId);
    await expiry.run('acme');
    expect(await stored('acme')).to.deep.equal(ids(...acme.today));
  });
});
