import { expect } from 'chai';
import { loadConfig } from '../../src/config/config.ts';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import { RETENTION_POLICY_FINALIZER } from '../../src/controller/retentionPolicyReconciler.ts';
import { isAtLeast } from '../../src/lifecycle/retentionRules.ts';
import { GROUP, VERSION, mergePatch, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { call, mintKey } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';
import { recordArchiveOutcome } from '../../src/lifecycle/archiveOutcomeStore.ts';

const NAMESPACE = 'platform';
const DAY_MS = 86_400_000;

const period = (text: string) => {
  const parsed = parseRetentionPeriod(text);
  if (!parsed) throw new Error(`${text} does not parse`);
  return parsed;
};

describe('retention periods', () => {
  it('are days, months or years, and refuse minutes, zero, fractions and more than 100 years', () => {
    expect(period('30d')).to.deep.equal({ text: '30d', months: 0, days: 30 });
    expect(period('18mo')).to.deep.equal({ text: '18mo', months: 18, days: 0 });
    expect(period('6y')).to.deep.equal({ text: '6y', months: 72, days: 0 });
    for (const wrong of ['6m', '0d', '1.5y', '101y', '6 y', 'y', '-1d', '6Y'])
      expect(parseRetentionPeriod(wrong), wrong).to.equal(undefined);
  });

  it('compare as lengths that hold from any date: a locked 1y may become 12mo or 400d, never 365d or 11mo', () => {
    expect(isAtLeast(period('12mo'), period('1y'))).to.equal(true);
    expect(isAtLeast(period('7y'), period('6y'))).to.equal(true);
    expect(isAtLeast(period('400d'), period('1y'))).to.equal(true);
    expect(isAtLeast(period('365d'), period('1y'))).to.equal(false);
    expect(isAtLeast(period('11mo'), period('1y'))).to.equal(false);
    expect(isAtLeast(period('1mo'), period('31d'))).to.equal(false);
    expect(isAtLeast(period('1mo'), period('28d'))).to.equal(true);
  });

  it('RETENTION_DEFAULT is read like the other durations, unset means forever, and a wrong one names the variable', () => {
    expect(loadConfig({}).retentionDefault).to.equal(undefined);
    expect(loadConfig({ RETENTION_DEFAULT: '6y' }).retentionDefault).to.deep.equal({ text: '6y', months: 72, days: 0 });
    expect(() => loadConfig({ RETENTION_DEFAULT: '6m' })).to.throw(/RETENTION_DEFAULT: must be a period such as 30d, 18mo or 6y/);
  });
});

/**
 * The RetentionPolicy controller through the real @kubernetes/client-node against the API stand-in, with
 * real Postgres, and GET /audit/retention on the real api role (RETENTION_DEFAULT=6y).
 */
describe('RetentionPolicy resources', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;

  before(async () => {
    harness = await startControllerHarness({ RETENTION_DEFAULT: '6y' });
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
    plural: 'retentionpolicies',
    ...(name ? { name } : {}),
  });
  const create = (name: string, spec: Record<string, unknown>) =>
    harness.custom.createNamespacedCustomObject({
      ...address(),
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'RetentionPolicy', metadata: { name }, spec },
    });
  const get = (name: string) => harness.custom.getNamespacedCustomObject(address(name) as never);
  const patchSpec = (name: string, spec: object) =>
    harness.custom.patchNamespacedCustomObject({ ...address(name), body: { spec } } as never, mergePatch);
  const condition = (object: any, type: string) => object.status?.conditions?.find((item: { type: string }) => item.type === type);
  const stored = async (tenant: string) =>
    (await harness.db.pool.query('SELECT retain, locked FROM retention_policies WHERE tenant_id = $1', [tenant])).rows[0];
  const warnings = async (name: string, reason: string) =>
    (await harness.core.listNamespacedEvent({ namespace: NAMESPACE })).items.filter(
      (event) => event.involvedObject.name === name && event.reason === reason && event.type === 'Warning',
    );
  const retentionOf = async (tenant: string) => {
    const { key } = await mintKey(harness.db.url, { tenantId: tenant, scopes: ['audit:read'] });
    return call(`${harness.api.baseUrl}/audit/retention`, { key });
  };
  const adminEvents = async (tenant: string) =>
    (
      await harness.db.pool.query(
        `SELECT action, details FROM event_fields WHERE tenant_id = $1 AND action LIKE 'admin.retention.%' ORDER BY occurred_at, event_id`,
        [tenant],
      )
    ).rows.map((row) => ({ action: row.action, details: JSON.parse(row.details) }));

  it('applies a policy: stored, Ready with the period in force, an admin event in the tenant trail, and read by the tenant', async () => {
    await create('acme', { tenantId: 'acme', retain: '7y' });
    await waitFor(async () => condition(await get('acme'), 'Ready')?.status === 'True', 'acme to be Ready');
    const object = await get('acme');
    expect(object.status).to.include({ enforced: '7y', locked: false, observedGeneration: object.metadata.generation });
    expect(condition(object, 'Ready')).to.include({ reason: 'Applied', message: 'Tenant acme keeps its events 7y.' });
    expect(object.metadata.finalizers).to.include(RETENTION_POLICY_FINALIZER);
    expect(await stored('acme')).to.deep.equal({ retain: '7y', locked: false });
    expect(await adminEvents('acme')).to.deep.equal([
      { action: 'admin.retention.set', details: { retain: '7y', locked: false, archive: false } },
    ]);

    const response = await retentionOf('acme');
    expect(response.status).to.equal(200);
    expect(response.json.retention).to.include({ tenant_id: 'acme', source: 'policy', retain: '7y', locked: false, archive: false });
    const keptSince = Date.parse(response.json.retention.kept_since);
    // Seven calendar years back from now (leap days included), give or take the request's time.
    const expected = new Date();
    expected.setUTCFullYear(expected.getUTCFullYear() - 7);
    expect(Math.abs(keptSince - expected.getTime())).to.be.lessThan(DAY_MS * 2);
  });

  it('stays quiet once applied: resyncs write no status, no Event and no admin event', async () => {
    await harness.reconciledAgain('retentionpolicies', NAMESPACE, 'acme');
    const mark = harness.kube.requestLog.length;
    await harness.reconciledAgain('retentionpolicies', NAMESPACE, 'acme', 3);
    const writes = harness.kube.requestLog
      .slice(mark)
      .filter((entry) => entry.token === 'controller' && entry.method !== 'GET' && !entry.path.includes('/leases'));
    expect(writes.map((entry) => `${entry.method} ${entry.path}`)).to.deep.equal([]);
    expect(await adminEvents('acme')).to.have.length(1);
  });

  it('answers a tenant without a policy with RETENTION_DEFAULT, and refuses unknown parameters and keys without audit:read', async () => {
    const response = await retentionOf('globex');
    expect(response.json.retention).to.include({ tenant_id: 'globex', source: 'default', retain: '6y', locked: false, updated_at: null });
    const { key } = await mintKey(harness.db.url, { tenantId: 'globex', scopes: ['audit:read'] });
    const unknown = await call(`${harness.api.baseUrl}/audit/retention?tenant=acme`, { key });
    expect(unknown.status).to.equal(422);
    expect(unknown.json.error).to.equal('validation_failed');
    const { key: exporter } = await mintKey(harness.db.url, { tenantId: 'globex', scopes: ['audit:export'] });
    const forbidden = await call(`${harness.api.baseUrl}/audit/retention`, { key: exporter });
    expect(forbidden.status).to.equal(403);
    expect(forbidden.json).to.include({ error: 'forbidden', required_scope: 'audit:read' });
  });

  it('refuses to shorten, unlock or delete a locked policy, says why, and goes on enforcing it; lengthening works', async () => {
    await create('initech', { tenantId: 'initech', retain: '6y', locked: true });
    await waitFor(async () => (await get('initech')).status?.enforced === '6y', 'initech to be enforced');
    expect(condition(await get('initech'), 'Ready')).to.include({ status: 'True', reason: 'Locked' });

    await patchSpec('initech', { retain: '365d' });
    await waitFor(async () => condition(await get('initech'), 'Stalled')?.reason === 'LockedPolicyShortened', 'the shortening refused');
    let object = await get('initech');
    expect(condition(object, 'Ready')).to.include({ status: 'False', reason: 'LockedPolicyShortened' });
    expect(condition(object, 'Ready').message).to.include('locked at 6y').and.to.include('365d would shorten it');
    expect(object.status).to.include({ enforced: '6y', locked: true });
    await waitFor(async () => (await warnings('initech', 'LockedPolicyShortened')).length === 1, 'a Warning Event naming the reason');
    expect(await stored('initech')).to.deep.equal({ retain: '6y', locked: true });
    expect((await retentionOf('initech')).json.retention).to.include({ source: 'policy', retain: '6y', locked: true });

    await patchSpec('initech', { retain: '6y', locked: false });
    await waitFor(async () => condition(await get('initech'), 'Stalled')?.reason === 'LockedPolicyUnlocked', 'the unlocking refused');
    expect(await stored('initech')).to.deep.equal({ retain: '6y', locked: true });

    await patchSpec('initech', { retain: '10y', locked: true });
    await waitFor(async () => (await get('initech')).status?.enforced === '10y', 'the lengthening applied');
    expect(condition(await get('initech'), 'Stalled')).to.equal(undefined);
    expect(await stored('initech')).to.deep.equal({ retain: '10y', locked: true });

    await harness.custom.deleteNamespacedCustomObject(address('initech') as never);
    await waitFor(async () => condition(await get('initech'), 'Stalled')?.reason === 'LockedPolicyRemoved', 'the deletion refused');
    object = await get('initech');
    expect(object.metadata.deletionTimestamp).to.be.a('string');
    expect(object.metadata.finalizers).to.include(RETENTION_POLICY_FINALIZER);
    expect(await stored('initech')).to.deep.equal({ retain: '10y', locked: true });
    expect((await adminEvents('initech')).map((event) => event.details.retain)).to.deep.equal(['6y', '10y']);
  });

  it('refuses in the database too: a locked policy cannot be shortened, unlocked or deleted by any writer', async () => {
    const refused = async (sql: string) => {
      const error = await harness.db.pool.query(sql).then(
        () => undefined,
        (failure: { code?: string }) => failure,
      );
      expect(error?.code, sql).to.equal('42501');
    };
    await refused(`UPDATE retention_policies SET retain = '1d', retain_months = 0, retain_days = 1 WHERE tenant_id = 'initech'`);
    await refused(`UPDATE retention_policies SET locked = false WHERE tenant_id = 'initech'`);
    await refused(`DELETE FROM retention_policies WHERE tenant_id = 'initech'`);
    await refused('TRUNCATE retention_policies');
    expect(await stored('initech')).to.deep.equal({ retain: '10y', locked: true });
  });

  it('removes an unlocked policy when its resource is deleted: the tenant falls back to the default', async () => {
    await create('hooli', { tenantId: 'hooli', retain: '30d' });
    await waitFor(async () => (await get('hooli')).status?.enforced === '30d', 'hooli to be enforced');
    await harness.custom.deleteNamespacedCustomObject(address('hooli') as never);
    await waitFor(
      async () => (await harness.custom.listNamespacedCustomObject(address())).items.every((item: any) => item.metadata.name !== 'hooli'),
      'hooli gone',
    );
    expect(await stored('hooli')).to.equal(undefined);
    expect((await retentionOf('hooli')).json.retention).to.include({ source: 'default', retain: '6y' });
    expect((await adminEvents('hooli')).map((event) => event.action)).to.deep.equal(['admin.retention.set', 'admin.retention.remove']);
  });

  it('shows a failing archive on the policy until a later pass archives again', async () => {
    await create('archiving', { tenantId: 'archiving', retain: '30d', archive: { bucket: 'audit-archive', prefix: 'trail' } });
    await waitFor(async () => condition(await get('archiving'), 'Ready')?.status === 'True', 'archiving to be Ready');
    expect(condition(await get('archiving'), 'Ready').message).to.equal(
      'Tenant archiving keeps its events 30d. Expiring events are archived to s3://audit-archive first, and expire only once the archive is read back intact.',
    );
    // What an expiry pass records when its archive fails (test/lifecycle/archive-expiry.test.ts).
    await recordArchiveOutcome(harness.db.pool, 'archiving', 'writing s3://audit-archive/trail/archiving/x failed: TimeoutError');
    await waitFor(async () => condition(await get('archiving'), 'Ready')?.status === 'False', 'the failure to show');
    const failing = await get('archiving');
    expect(condition(failing, 'Ready')).to.include({ reason: 'ArchiveFailing' });
    expect(condition(failing, 'Ready').message).to.match(
      /Archiving before expiry failed at .*: writing s3:\/\/audit-archive\/trail\/archiving\/x failed: TimeoutError\. Nothing of that range expired/,
    );
    expect(condition(failing, 'Stalled')).to.include({ status: 'True', reason: 'ArchiveFailing' });
    expect(failing.status).to.include({ enforced: '30d' });
    await recordArchiveOutcome(harness.db.pool, 'archiving', null);
    await waitFor(async () => condition(await get('archiving'), 'Ready')?.status === 'True', 'the policy to be Ready again');
  });

  it('gives a tenant one policy: a second resource for it is Stalled and changes nothing', async () => {
    await create('acme-again', { tenantId: 'acme', retain: '1d' });
    await waitFor(async () => condition(await get('acme-again'), 'Stalled')?.reason === 'TenantHasPolicy', 'the second policy refused');
    expect(await stored('acme')).to.deep.equal({ retain: '7y', locked: false });
  });
});
