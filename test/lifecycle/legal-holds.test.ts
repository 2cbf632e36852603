import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { LEGAL_HOLD_FINALIZER } from '../../src/controller/legalHoldReconciler.ts';
import { GROUP, VERSION, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { TEST_PEPPER } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);
const NAMESPACE = 'legal';

/**
 * LegalHold resources through the real @kubernetes/client-node against the API stand-in, with real Postgres;
 * `audit-trail holds list` as an operator runs it (the CLI process on the same database).
 */
describe('LegalHold resources', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;

  before(async () => {
    harness = await startControllerHarness();
    harness.startController('replica-1');
    await waitFor(() => harness.controllers[0]!.isLeader, 'the controller to lead');
  });

  after(async () => {
    await harness?.stop();
  });

  const address = (name?: string) => ({
    group: GROUP,
    version: VERSION,
    namespace: NAMESPACE,
    plural: 'legalholds',
    ...(name ? { name } : {}),
  });
  const create = (name: string, spec: Record<string, unknown>) =>
    harness.custom.createNamespacedCustomObject({
      ...address(),
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'LegalHold', metadata: { name }, spec },
    });
  const get = (name: string) => harness.custom.getNamespacedCustomObject(address(name) as never);
  const holdRows = async (tenant: string) =>
    (
      await harness.db.pool.query(
        `SELECT id, since, until, action_prefixes, reason, reference, released_at, released_by FROM legal_holds WHERE tenant_id = $1`,
        [tenant],
      )
    ).rows;
  const trail = async (tenant: string) =>
    (
      await harness.db.pool.query(
        `SELECT action, resource_id, user_id, details FROM event_fields WHERE tenant_id = $1 AND action LIKE 'admin.legal_hold.%' ORDER BY occurred_at, event_id`,
        [tenant],
      )
    ).rows.map((row) => ({ ...row, details: JSON.parse(row.details) }));
  const holdsList = async (...args: string[]) => {
    const { stdout } = await run(process.execPath, ['src/cli.ts', 'holds', 'list', ...args], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: harness.db.url, KEY_PEPPER: TEST_PEPPER },
    });
    return stdout;
  };

  it('places the hold once, records it in the tenant trail and in status, and lists it', async () => {
    await create('matter-17', {
      tenantId: 'acme',
      since: '2026-03-01T00:00:00Z',
      until: '2026-03-02T00:00:00Z',
      actionPrefixes: ['phi.'],
      reason: 'Smith v. Acme',
      reference: 'MATTER-17',
    });
    await waitFor(
      async () => (await get('matter-17')).status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'),
      'Ready',
    );
    const object = await get('matter-17');
    expect(object.status.holdId).to.match(/^hold_[0-9a-f]{32}$/);
    expect(object.metadata.finalizers).to.include(LEGAL_HOLD_FINALIZER);
    const [row] = await holdRows('acme');
    expect(row).to.deep.include({
      id: object.status.holdId,
      action_prefixes: ['phi.'],
      reason: 'Smith v. Acme',
      reference: 'MATTER-17',
      released_at: null,
    });
    expect(row.since.toISOString()).to.equal('2026-03-01T00:00:00.000Z');
    expect(row.until.toISOString()).to.equal('2026-03-02T00:00:00.000Z');
    // Resyncs do not place it again.
    await harness.reconciledAgain('legalholds', NAMESPACE, 'matter-17', 2);
    expect(await holdRows('acme')).to.have.length(1);
    const events = await trail('acme');
    expect(events).to.have.length(1);
    expect(events[0]).to.deep.include({
      action: 'admin.legal_hold.place',
      resource_id: object.status.holdId,
      user_id: `kubernetes:${NAMESPACE}/matter-17`,
    });
    expect(events[0].details).to.deep.equal({
      since: '2026-03-01T00:00:00.000Z',
      until: '2026-03-02T00:00:00.000Z',
      action_prefixes: ['phi.'],
      reason: 'Smith v. Acme',
      reference: 'MATTER-17',
    });

    const listed = await holdsList();
    expect(listed).to.include(object.status.holdId).and.to.include('acme').and.to.include('MATTER-17').and.to.include('in place');
    const json = JSON.parse(await holdsList('--tenant', 'acme', '--json'));
    expect(json.map((hold: { id: string }) => hold.id)).to.deep.equal([object.status.holdId]);
    expect(JSON.parse(await holdsList('--tenant', 'globex', '--json'))).to.deep.equal([]);
  });

  it('releases the hold when the resource is deleted: the row keeps when and by whom, the trail records it, the resource goes', async () => {
    const holdId = (await get('matter-17')).status.holdId;
    await harness.custom.deleteNamespacedCustomObject(address('matter-17') as never);
    await waitFor(async () => (await harness.custom.listNamespacedCustomObject(address())).items.length === 0, 'the resource gone');
    const [row] = await holdRows('acme');
    expect(row.released_at).to.be.instanceOf(Date);
    expect(row.released_by).to.equal(`kubernetes:${NAMESPACE}/matter-17`);
    expect((await trail('acme')).map((event) => event.action)).to.deep.equal(['admin.legal_hold.place', 'admin.legal_hold.release']);
    expect(await holdsList('--tenant', 'acme')).to.equal('no legal holds in place\n');
    const all = JSON.parse(await holdsList('--tenant', 'acme', '--all', '--json'));
    expect(all).to.have.length(1);
    expect(all[0]).to.include({ id: holdId, released_by: `kubernetes:${NAMESPACE}/matter-17` });
  });

  it('keeps holds release-only in the database: no writer can change a hold, re-place a released one or delete one', async () => {
    const refused = async (sql: string) => {
      const error = await harness.db.pool.query(sql).then(
        () => undefined,
        (failure: { code?: string }) => failure,
      );
      expect(error?.code, sql).to.equal('42501');
    };
    await create('matter-18', { tenantId: 'acme', reason: 'audit', reference: 'MATTER-18' });
    await waitFor(async () => typeof (await get('matter-18')).status?.holdId === 'string', 'the second hold placed');
    await refused(`UPDATE legal_holds SET until = now() WHERE reference = 'MATTER-18'`);
    await refused(`UPDATE legal_holds SET released_at = NULL, released_by = NULL WHERE reference = 'MATTER-17'`);
    await refused(`DELETE FROM legal_holds WHERE reference = 'MATTER-17'`);
    await refused('TRUNCATE legal_holds');
    expect(await holdRows('acme')).to.have.length(2);
  });

  it('matches events as webhook filters do: tenant, range (since inclusive, until exclusive) and action families', async () => {
    const held = async (tenant: string, at: string, action: string) =>
      (await harness.db.pool.query('SELECT audit_event_held($1, $2::timestamptz, $3) AS held', [tenant, at, action])).rows[0].held;
    await create('matter-19', {
      tenantId: 'globex',
      since: '2026-05-01T00:00:00Z',
      until: '2026-05-02T00:00:00Z',
      actionPrefixes: ['phi.', 'admin.key'],
      reason: 'r',
      reference: 'MATTER-19',
    });
    await waitFor(async () => typeof (await get('matter-19')).status?.holdId === 'string', 'the hold placed');
    expect(await held('globex', '2026-05-01T00:00:00Z', 'phi.read')).to.equal(true);
    expect(await held('globex', '2026-05-01T23:59:59.999Z', 'admin.key.create')).to.equal(true);
    expect(await held('globex', '2026-05-02T00:00:00Z', 'phi.read'), 'until is exclusive').to.equal(false);
    expect(await held('globex', '2026-04-30T23:59:59.999Z', 'phi.read')).to.equal(false);
    expect(await held('globex', '2026-05-01T12:00:00Z', 'admin.webhook.create')).to.equal(false);
    expect(await held('globex', '2026-05-01T12:00:00Z', 'phiread')).to.equal(false);
    expect(await held('initech', '2026-05-01T12:00:00Z', 'phi.read'), 'another tenant').to.equal(false);
  });
});
