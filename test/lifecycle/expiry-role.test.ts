import { expect } from 'chai';
import { GROUP, VERSION, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NAMESPACE = 'audit-policies';

/**
 * The whole lifecycle as an operator runs it: RetentionPolicy and LegalHold resources through the real
 * @kubernetes/client-node against the API stand-in, the controller role's reconcilers, and the retention
 * role running its passes (every second here) on real Postgres.
 */
describe('the retention role with policies and holds declared in Kubernetes', function () {
  this.timeout(90_000);
  let harness: ControllerHarness;
  let retention: TestService | undefined;
  const now = Date.now();
  const day3 = [
    newEvent({ tenantId: 'acme', occurredAtMs: now - 3 * DAY }),
    newEvent({ tenantId: 'acme', occurredAtMs: now - 3 * DAY + HOUR }),
  ];
  const day2 = [
    newEvent({ tenantId: 'acme', occurredAtMs: now - 2 * DAY }),
    newEvent({ tenantId: 'acme', occurredAtMs: now - 2 * DAY + HOUR }),
  ];
  const today = [newEvent({ tenantId: 'acme', occurredAtMs: now - HOUR })];
  const globex = [newEvent({ tenantId: 'globex', occurredAtMs: now - 3 * DAY })];
  const seeded = [...day3, ...day2, ...today, ...globex];

  before(async () => {
    harness = await startControllerHarness();
    harness.startController('replica-1');
    await waitFor(() => harness.controllers[0]!.isLeader, 'the controller to lead');
    await seedEvents(harness.db.url, seeded);
  });

  after(async () => {
    await retention?.stop();
    await harness?.stop();
  });

  const create = (plural: string, kind: string, name: string, spec: Record<string, unknown>) =>
    harness.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NAMESPACE,
      plural,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name }, spec },
    });
  const remaining = async () => {
    const { rows } = await harness.db.pool.query('SELECT event_id::text FROM events WHERE event_id = ANY($1::uuid[])', [
      seeded.map((event) => event.eventId),
    ]);
    return rows.map((row) => row.event_id).sort();
  };
  const ids = (...events: Array<{ eventId: string }>) => events.map((event) => event.eventId).sort();

  it('expires exactly what the 1-day policy lets go, keeps the held second day until the hold is released', async () => {
    const stored = async (sql: string) => (await harness.db.pool.query(sql)).rows[0].n;
    await create('retentionpolicies', 'RetentionPolicy', 'acme', { tenantId: 'acme', retain: '1d' });
    // Stored before the hold is declared: the controller reconciles the two kinds concurrently, and the trail's
    // order below is the order they were applied in.
    await waitFor(async () => (await stored(`SELECT count(*)::int AS n FROM retention_policies`)) === 1, 'the policy stored');
    await create('legalholds', 'LegalHold', 'day-2', {
      tenantId: 'acme',
      since: new Date(now - 2 * DAY - HOUR).toISOString(),
      until: new Date(now - 2 * DAY + 2 * HOUR).toISOString(),
      reason: 'Investigation of day 2',
      reference: 'INV-2',
    });
    await waitFor(
      async () => (await stored(`SELECT count(*)::int AS n FROM legal_holds WHERE released_at IS NULL`)) === 1,
      'the hold placed',
    );

    retention = await startTestService({ databaseUrl: harness.db.url, roles: ['retention'], env: { RETENTION_INTERVAL: '1s' } });
    await waitFor(async () => (await remaining()).length === seeded.length - day3.length, 'the third day expired');
    // Passes go on; what is held or kept stays.
    await waitFor(async () => (await retention!.metric('audit_expiry_runs_total{outcome="completed"}')) >= 3, 'three passes');
    expect(await remaining()).to.deep.equal(ids(...day2, ...today, ...globex));
    expect(await retention.metric('audit_events_expired_total')).to.equal(day3.length);

    await harness.custom.deleteNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NAMESPACE,
      plural: 'legalholds',
      name: 'day-2',
    });
    await waitFor(async () => (await remaining()).length === today.length + globex.length, 'the second day expired once released');
    expect(await remaining()).to.deep.equal(ids(...today, ...globex));
    // The pass records itself in the trail after its last batch.
    await waitFor(
      async () =>
        (await stored(`SELECT count(*)::int AS n FROM events WHERE tenant_id = 'acme' AND action = 'audit.retention.expire'`)) === 2,
      'the second pass recorded',
    );
    const trail = (
      await harness.db.pool.query(
        `SELECT action FROM events WHERE tenant_id = 'acme' AND action LIKE ANY ($1) ORDER BY occurred_at, event_id`,
        [['admin.%', 'audit.retention.%']],
      )
    ).rows.map((row) => row.action);
    expect(trail).to.deep.equal([
      'admin.retention.set',
      'admin.legal_hold.place',
      'audit.retention.expire',
      'admin.legal_hold.release',
      'audit.retention.expire',
    ]);
  });
});
