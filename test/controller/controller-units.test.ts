import { expect } from 'chai';
import { Backoff } from '../../src/controller/backoff.ts';
import { healthConditions, setCondition, type Condition } from '../../src/controller/conditions.ts';
import { assessCrd, crdProblem } from '../../src/controller/crdGuard.ts';
import { jsonEqual, mergePatchDiff } from '../../src/controller/mergePatchDiff.ts';
import { API_KEY } from '../../src/controller/resources.ts';
import { TENANT_ANNOTATION, bindingOf, tenancyProblem, tenantsOf } from '../../src/controller/tenancy.ts';
import { defaultRoles } from '../../src/main.ts';

describe('status as a merge patch', () => {
  it('compares JSON as values: key order is irrelevant, array order is not', () => {
    expect(jsonEqual({ a: 1, b: { c: [1, { d: 2, e: 3 }] } }, { b: { c: [1, { e: 3, d: 2 }] }, a: 1 })).to.equal(true);
    expect(jsonEqual({ a: [1, 2] }, { a: [2, 1] })).to.equal(false);
    expect(jsonEqual({ a: 1, b: undefined }, { a: 1 })).to.equal(true);
  });

  it('is undefined when nothing changed, names removed fields as null and replaces arrays whole', () => {
    const current = {
      state: 'Active',
      lookupId: '1a2b3c4d',
      lastDeliveryAt: '2026-01-01T00:00:00Z',
      conditions: [{ type: 'Ready', status: 'True' }],
    };
    expect(
      mergePatchDiff(current, {
        conditions: [{ status: 'True', type: 'Ready' }],
        lookupId: '1a2b3c4d',
        lastDeliveryAt: '2026-01-01T00:00:00Z',
        state: 'Active',
      }),
    ).to.equal(undefined);
    expect(
      mergePatchDiff(current, {
        state: 'Active',
        lookupId: '1a2b3c4d',
        lastDeliveryAt: undefined,
        conditions: [{ type: 'Ready', status: 'False' }],
      }),
    ).to.deep.equal({
      lastDeliveryAt: null,
      conditions: [{ type: 'Ready', status: 'False' }],
    });
    expect(mergePatchDiff(undefined, { id: 'wh_1' })).to.deep.equal({ id: 'wh_1' });
    expect(mergePatchDiff({ nested: { a: 1, b: 2 } }, { nested: { a: 1 } })).to.deep.equal({ nested: { b: null } });
  });
});

describe('kstatus conditions', () => {
  const at = new Date('2026-05-01T10:00:00Z');
  const later = new Date('2026-05-01T11:00:00Z');
  const types = (conditions: Condition[]) => conditions.map((condition) => `${condition.type}=${condition.status}`);

  it('Ready: Ready=True alone; Stalled: Ready=False and Stalled=True; Reconciling: Reconciling=True beside the Ready there was', () => {
    const stalled = healthConditions(undefined, { state: 'Stalled', reason: 'InvalidSpec', message: 'm' }, 1, at);
    expect(types(stalled)).to.deep.equal(['Ready=False', 'Stalled=True']);
    const reconciling = healthConditions(stalled, { state: 'Reconciling', reason: 'RetryingAfterError', message: 'm' }, 1, at);
    expect(types(reconciling)).to.deep.equal(['Ready=False', 'Reconciling=True']);
    expect(
      types(healthConditions(undefined, { state: 'Reconciling', reason: 'RetryingAfterError', message: 'm' }, undefined, at)),
    ).to.deep.equal(['Ready=Unknown', 'Reconciling=True']);
    const ready = healthConditions(reconciling, { state: 'Ready', reason: 'Active', message: 'm' }, 2, later);
    expect(types(ready)).to.deep.equal(['Ready=True']);
    expect(ready[0]).to.include({ observedGeneration: 2, lastTransitionTime: '2026-05-01T11:00:00Z' });
  });

  it('keeps lastTransitionTime and the position of a condition whose status did not change', () => {
    const first = setCondition(
      setCondition(undefined, { type: 'Ready', status: 'False', reason: 'A', message: '' }, at),
      { type: 'Stalled', status: 'True', reason: 'A', message: '' },
      at,
    );
    const second = setCondition(first, { type: 'Ready', status: 'False', reason: 'B', message: 'changed' }, later);
    expect(second.map((condition) => condition.type)).to.deep.equal(['Ready', 'Stalled']);
    expect(second[0]).to.include({ reason: 'B', lastTransitionTime: '2026-05-01T10:00:00Z' });
  });
});

describe('watch restart backoff', () => {
  it('doubles from the initial delay up to the cap, with jitter on top, and starts over after a quiet period', () => {
    const policy = { initialMs: 800, maxMs: 30_000, resetAfterMs: 120_000, spread: [1, 2] as const };
    const steady = new Backoff(policy, () => 0);
    const delays = [0, 1, 2, 3, 4, 5, 6].map((second) => steady.next(second * 1000));
    expect(delays).to.deep.equal([800, 1600, 3200, 6400, 12_800, 25_600, 30_000]);
    expect(steady.next(6000 + 120_000)).to.equal(800);
    const jittered = new Backoff(policy, () => 0.5);
    expect([jittered.next(0), jittered.next(1), jittered.next(2)]).to.deep.equal([1200, 2400, 4800]);
    expect(new Backoff(policy, () => 0.99).next(0)).to.be.below(1600);
  });
});

describe('the CRD guard: what an installed CRD says about its kind', () => {
  const kind = { ...API_KEY, schemaVersion: 3 };
  const crd = (annotations?: Record<string, string>) => ({
    metadata: { name: 'apikeys.audittrail.dev', ...(annotations ? { annotations } : {}) },
  });

  it('lets the kind be reconciled only at the schema version it needs or a newer one', () => {
    expect(assessCrd(crd({ 'audittrail.dev/schema-version': '3' }), kind)).to.deep.equal({ state: 'current', installed: 3 });
    // A newer CRD (a rollback of the controller alone) only adds fields: still current.
    expect(assessCrd(crd({ 'audittrail.dev/schema-version': '4' }), kind)).to.deep.equal({ state: 'current', installed: 4 });
    expect(assessCrd(crd({ 'audittrail.dev/schema-version': '2' }), kind)).to.deep.equal({ state: 'outdated', installed: 2 });
    expect(assessCrd(crd(), kind)).to.deep.equal({ state: 'outdated', installed: undefined });
    expect(assessCrd(crd({ 'audittrail.dev/schema-version': 'v3' }), kind)).to.deep.equal({ state: 'outdated', installed: undefined });
    expect(assessCrd(undefined, kind)).to.deep.equal({ state: 'missing' });
  });

  it('explains each refusal with the versions and how to upgrade, and has nothing to say about a current CRD', () => {
    expect(crdProblem(kind, { state: 'current', installed: 3 })).to.equal(undefined);
    const outdated = crdProblem(kind, { state: 'outdated', installed: 2 })!;
    expect(outdated.reason).to.equal('CRDOutdated');
    expect(outdated.message).to.include('CRD apikeys.audittrail.dev is at schema version 2; this controller needs version 3');
    expect(outdated.message).to.include('kubectl apply --server-side --force-conflicts -f crds/');
    expect(crdProblem(kind, { state: 'outdated', installed: undefined })!.message).to.include('carries no schema version');
    expect(crdProblem(kind, { state: 'missing' })!.reason).to.equal('CRDMissing');
    const unreadable = crdProblem(kind, { state: 'unreadable', cause: 'the Kubernetes API answered 403' })!;
    expect(unreadable.reason).to.equal('CRDUnreadable');
    expect(unreadable.message).to.include('get, list and watch on the customresourcedefinition apikeys.audittrail.dev');
    expect(crdProblem(kind, { state: 'unread' })!.reason).to.equal('CRDUnreadable');
  });
});

describe('the roles of a plain `audit-trail serve`', () => {
  it('leaves the controller out where no cluster is configured, so that the process gets ready outside one', () => {
    const everyRole = ['ingest', 'relay', 'worker', 'sealer', 'streams', 'retention', 'controller', 'api'];
    expect(defaultRoles({})).to.deep.equal(everyRole.filter((role) => role !== 'controller'));
    expect(defaultRoles({ KUBECONFIG: '' })).to.not.include('controller');
    expect(defaultRoles({ KUBERNETES_SERVICE_HOST: '10.96.0.1' })).to.deep.equal(everyRole);
    expect(defaultRoles({ KUBECONFIG: '/home/ops/.kube/config' })).to.deep.equal(everyRole);
  });
});

describe('tenant bindings of namespaces', () => {
  const namespace = (annotations?: Record<string, string>) => ({ metadata: { name: 'team', ...(annotations ? { annotations } : {}) } });

  it('reads the binding from the annotation: bound, unbound, invalid, or unknown without the Namespace', () => {
    expect(bindingOf(namespace({ [TENANT_ANNOTATION]: 'acme' }))).to.deep.equal({ state: 'bound', tenant: 'acme' });
    expect(bindingOf(namespace())).to.deep.equal({ state: 'unbound' });
    expect(bindingOf(namespace({ [TENANT_ANNOTATION]: 'two words' }))).to.deep.equal({ state: 'invalid', value: 'two words' });
    expect(bindingOf(undefined)).to.deep.equal({ state: 'unknown' });
  });

  it("allows only the bound tenant's resources, every one in an unbound namespace unless a binding is required", () => {
    const bound = { state: 'bound', tenant: 'acme' } as const;
    expect(tenancyProblem('ApiKey', 'team', bound, ['acme'], true)).to.equal(undefined);
    expect(tenancyProblem('ApiKey', 'team', bound, ['globex'], false)?.reason).to.equal('TenantNotBoundToNamespace');
    expect(tenancyProblem('AuditLogStream', 'team', bound, 'all', false)?.message).to.include('acts for every tenant');
    expect(tenancyProblem('AuditLogStream', 'team', bound, ['acme', 'globex'], false)?.message).to.include('acts for globex, so');
    expect(tenancyProblem('ApiKey', 'team', { state: 'unbound' }, ['globex'], false)).to.equal(undefined);
    expect(tenancyProblem('ApiKey', 'team', { state: 'unbound' }, ['globex'], true)?.reason).to.equal('NamespaceNotBound');
    expect(tenancyProblem('ApiKey', 'team', { state: 'unknown' }, ['acme'], false)?.reason).to.equal('NamespaceUnreadable');
    expect(tenantsOf({ spec: { tenantIds: ['a', 'b'] } } as never)).to.deep.equal(['a', 'b']);
    expect(tenantsOf({ spec: { allTenants: true } } as never)).to.equal('all');
  });
});
