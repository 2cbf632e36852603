import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { ApiKeyService } from '../../src/auth/apiKeyService.ts';
import { API_KEY_FINALIZER } from '../../src/controller/apiKeyReconciler.ts';
import type { KubernetesController } from '../../src/controller/controller.ts';
import { GROUP, LEASE_TIMING, VERSION, mergePatch, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import type { TestDatabase } from '../support/database.ts';
import type { KubeApiServer } from '../support/kube-apiserver/server.ts';
import { TEST_PEPPER, call, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/** The annotation as users write it (docs/kubernetes.md). */
const ROTATE_ANNOTATION = 'audittrail.dev/rotate';

const NAMESPACE = 'team-a';

/**
 * The controller through the real @kubernetes/client-node against the API stand-in on loopback
 * (test/support/kube-apiserver), with real Postgres, and the real api role to try the keys it mints.
 */
describe('ApiKey controller', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;
  let kube: KubeApiServer;
  let keys: ApiKeyService;
  let custom: CustomObjectsApi;
  let core: CoreV1Api;
  let controllers: KubernetesController[];
  let db: TestDatabase;
  let api: TestService;

  before(async () => {
    harness = await startControllerHarness();
    ({ kube, keys, custom, core, controllers, db, api } = harness);
    harness.startController('replica-1');
    await waitFor(() => controllers[0]!.isLeader, 'the first replica to lead');
  });

  after(async () => {
    await harness?.stop();
  });

  const apiKey = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'ApiKey',
    metadata: { name },
    spec,
  });
  const create = (body: object) =>
    custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'apikeys', body });
  const get = (name: string) =>
    custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'apikeys', name });
  const patchSpec = (name: string, spec: object) =>
    custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'apikeys', name, body: { spec } },
      mergePatch,
    );
  const secretKey = async (name: string) => {
    const secret = await core.readNamespacedSecret({ name, namespace: NAMESPACE });
    return { key: Buffer.from(secret.data!.apiKey!, 'base64').toString('utf8'), secret };
  };
  const listEvents = (key: string) => call(`${api.baseUrl}/audit/events?limit=1`, { key });

  async function activeKey(name: string) {
    await waitFor(async () => (await get(name)).status?.state === 'Active', `${name} to become Active`);
    return get(name);
  }

  it('mints a key once, writes it only to the owned Secret, reports its lookup id, and the key works', async () => {
    await create(apiKey('siem', { tenantId: 'acme', scopes: ['audit:read'], description: 'SIEM', secretName: 'siem-key' }));
    const object = await activeKey('siem');
    expect(object.status.lookupId).to.match(/^[0-9a-f]{8}$/);
    expect(object.metadata.finalizers).to.include(API_KEY_FINALIZER);
    expect(object.status.observedGeneration).to.equal(object.metadata.generation);
    expect(object.status.conditions.find((condition: { type: string }) => condition.type === 'Ready')).to.include({
      status: 'True',
      reason: 'Active',
    });

    const { key, secret } = await secretKey('siem-key');
    expect(key).to.match(new RegExp(`^atr_live_${object.status.lookupId}_[0-9a-f]{32}$`));
    expect(secret.metadata!.ownerReferences![0]).to.include({ kind: 'ApiKey', name: 'siem', uid: object.metadata.uid, controller: true });
    expect((await listEvents(key)).status).to.equal(200);

    const record = await keys.find(object.status.lookupId);
    expect(record).to.deep.include({
      tenantId: 'acme',
      scopes: ['audit:read'],
      description: 'SIEM',
      managedBy: `kubernetes:${NAMESPACE}/siem/${object.metadata.uid}`,
    });
    // The key appears nowhere but in the Secret: not in status, not in Kubernetes Events.
    const events = await core.listNamespacedEvent({ namespace: NAMESPACE });
    expect(events.items.map((event) => event.reason)).to.include('KeyMinted');
    expect(JSON.stringify(object) + JSON.stringify(events)).not.to.include(key);

    // Resyncs do not mint again.
    await harness.reconciledAgain('apikeys', NAMESPACE, 'siem');
    expect((await get('siem')).status.lookupId).to.equal(object.status.lookupId);
    expect((await keys.list('acme')).filter((item) => item.managedBy?.includes('/siem/'))).to.have.length(1);
  });

  it('applies scope, allow-list and description changes in place', async () => {
    const before = await get('siem');
    await patchSpec('siem', { scopes: ['audit:read', 'audit:export'], allowedCidrs: ['127.0.0.1'], description: 'SIEM and BI' });
    await waitFor(async () => (await keys.find(before.status.lookupId)).scopes.length === 2, 'the new scopes in the database');
    const record = await keys.find(before.status.lookupId);
    expect(record).to.deep.include({ scopes: ['audit:export', 'audit:read'], allowedCidrs: ['127.0.0.1/32'], description: 'SIEM and BI' });
    const after = await get('siem');
    expect(after.status.lookupId).to.equal(before.status.lookupId);
    expect(after.metadata.generation).to.equal(before.metadata.generation + 1);
    await waitFor(
      async () => (await get('siem')).status.observedGeneration === after.metadata.generation,
      'observedGeneration to catch up',
    );
  });

  it('revokes on revoked: true, and the api refuses the key within 5 s; revoked on purpose is a settled state (Ready=True, reason Revoked)', async () => {
    const { key } = await secretKey('siem-key');
    await patchSpec('siem', { revoked: true });
    const started = Date.now();
    await waitFor(async () => (await listEvents(key)).status === 401, 'the key to stop working', 5_000);
    expect(Date.now() - started).to.be.below(5_000);
    await waitFor(async () => (await get('siem')).status.state === 'Revoked', 'status Revoked');
    const conditions = (await get('siem')).status.conditions;
    expect(conditions.find((condition: { type: string }) => condition.type === 'Ready')).to.include({ status: 'True', reason: 'Revoked' });
    expect(conditions.map((condition: { type: string }) => condition.type)).to.deep.equal(['Ready']);
  });

  it('shows a key revoked outside Kubernetes (audit-trail keys revoke) at the next resync as Stalled, and mints a new one only on the rotate annotation', async () => {
    await create(apiKey('drift', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'drift-key' }));
    const object = await activeKey('drift');
    const { stdout } = await promisify(execFile)(process.execPath, ['src/cli.ts', 'keys', 'revoke', object.status.lookupId], {
      env: { ...process.env, DATABASE_URL: db.url, KEY_PEPPER: TEST_PEPPER, LOG_LEVEL: 'error' },
    });
    expect(stdout).to.include(`revoked ${object.status.lookupId}`);
    const condition = (item: any, type: string) => item.status.conditions.find((candidate: { type: string }) => candidate.type === type);
    await waitFor(async () => condition(await get('drift'), 'Ready').reason === 'RevokedOutsideKubernetes', 'the drift in status');
    const drifted = await get('drift');
    expect(drifted.status).to.include({ state: 'Revoked', lookupId: object.status.lookupId });
    expect(condition(drifted, 'Ready')).to.include({ status: 'False' });
    expect(condition(drifted, 'Stalled')).to.include({ status: 'True', reason: 'RevokedOutsideKubernetes' });
    expect((await keys.list('acme')).filter((record) => record.managedBy?.includes('/drift/'))).to.have.length(1);

    await custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        namespace: NAMESPACE,
        plural: 'apikeys',
        name: 'drift',
        body: { metadata: { annotations: { [ROTATE_ANNOTATION]: 'after-cli-revoke' } } },
      },
      mergePatch,
    );
    const renewed = await activeKey('drift');
    expect(renewed.status.lookupId).not.to.equal(object.status.lookupId);
    expect((await listEvents((await secretKey('drift-key')).key)).status).to.equal(200);
  });

  it('reports a description holding U+0000 as Stalled/InvalidSpec and mints nothing (Postgres could not store it)', async () => {
    await create(apiKey('nul', { tenantId: 'acme', scopes: ['audit:read'], description: 'a\u0000b', secretName: 'nul-key' }));
    await waitFor(
      async () =>
        (await get('nul')).status?.conditions?.some(
          (c: { type: string; reason: string }) => c.type === 'Stalled' && c.reason === 'InvalidSpec',
        ),
      'Stalled/InvalidSpec',
    );
    const object = await get('nul');
    const ready = object.status.conditions.find((c: { type: string }) => c.type === 'Ready');
    expect(ready).to.include({ status: 'False', reason: 'InvalidSpec' });
    expect(ready.message).to.include('spec.description: must not contain the NUL character');
    expect(await keys.findManaged(`kubernetes:${NAMESPACE}/nul/${object.metadata.uid}`)).to.equal(undefined);
  });

  it('revokes the key when the resource is deleted, then lets it go; the Secret is garbage-collected', async () => {
    await create(apiKey('temp', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'temp-key' }));
    const object = await activeKey('temp');
    const { key } = await secretKey('temp-key');
    await custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'apikeys', name: 'temp' });
    await waitFor(
      async () =>
        (await get('temp').then(
          () => 'present',
          () => 'gone',
        )) === 'gone',
      'the ApiKey to be deleted',
    );
    expect((await keys.find(object.status.lookupId)).revokedAt).to.be.an.instanceOf(Date);
    await waitFor(async () => (await listEvents(key)).status === 401, 'the key to stop working', 5_000);
    const secret = await core.readNamespacedSecret({ name: 'temp-key', namespace: NAMESPACE }).then(
      () => 'present',
      (error: { code: number }) => error.code,
    );
    expect(secret).to.equal(404);
  });

  it('has invalid specs refused by the CRD schema and its CEL rules', async () => {
    const refusal = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: { code: number; body: string }) => error,
      );
    const scope = await refusal(create(apiKey('bad', { tenantId: 'acme', scopes: ['admin'], secretName: 'bad-key' })));
    expect(scope?.code).to.equal(422);
    expect(String(scope?.body)).to.include('spec.scopes');
    const cidr = await refusal(
      create(apiKey('bad', { tenantId: 'acme', scopes: ['audit:read'], allowedCidrs: ['10.0.0.0/33'], secretName: 'bad-key' })),
    );
    expect(cidr?.code).to.equal(422);
    expect(String(cidr?.body)).to.include('must be an IP address or CIDR range');
    // Transition rules: the tenant is immutable, a revoked key stays revoked.
    const tenant = await refusal(patchSpec('siem', { tenantId: 'globex' }));
    expect(String(tenant?.body)).to.include('tenantId is immutable');
    const unrevoke = await refusal(patchSpec('siem', { revoked: false }));
    expect(unrevoke?.code).to.equal(422);
    expect(String(unrevoke?.body)).to.include('cannot be restored');
  });

  it('recovers from a cut watch and from 410 Gone', async () => {
    kube.compact();
    kube.closeWatches();
    await create(apiKey('after-gone', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'after-gone-key' }));
    await activeKey('after-gone');
    expect(
      kube.requests.filter((request) => request.startsWith('GET /apis/audittrail.dev/v1alpha1/apikeys') && !request.includes('watch'))
        .length,
      're-listed',
    ).to.be.at.least(2);
  });

  it('runs one leader among two replicas and fails over when the leader stops', async () => {
    // Its own token tells its requests apart in the stand-in's log.
    const second = harness.startController('replica-2', { token: 'replica-2' });
    // The second replica has tried for the Lease for longer than it lasts unrenewed (whole seconds) and left it.
    const leaseReads = () =>
      kube.requestLog.filter(
        (entry) => entry.token === 'replica-2' && entry.method === 'GET' && entry.path.endsWith('/leases/audit-trail-controller'),
      ).length;
    const retriesPerLease = (Math.ceil(LEASE_TIMING.leaseDurationMs / 1000) * 1000) / LEASE_TIMING.retryPeriodMs;
    await waitFor(() => leaseReads() > retriesPerLease, 'the second replica to try for the lease repeatedly', 20_000);
    expect(controllers.filter((controller) => controller.isLeader)).to.have.length(1);
    expect(controllers[0]!.isLeader).to.equal(true);
    await controllers[0]!.stop();
    await waitFor(() => second.isLeader, 'the second replica to take over', 5_000);
    await create(apiKey('failover', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'failover-key' }));
    await activeKey('failover');
  });

  it('runs as the controller role of the service (audit-trail serve --roles controller)', async () => {
    await Promise.all(controllers.map((controller) => controller.stop()));
    const role = await startTestService({
      databaseUrl: db.url,
      roles: ['controller'],
      kubeConfig: kube.kubeConfig(),
      env: { POD_NAME: 'role-replica', POD_NAMESPACE: 'audit-system', CONTROLLER_NAMESPACES: NAMESPACE },
    });
    try {
      await create(apiKey('from-role', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'from-role-key' }));
      const object = await activeKey('from-role');
      const { key } = await secretKey('from-role-key');
      expect((await listEvents(key)).status).to.equal(200);
      expect((await keys.find(object.status.lookupId)).managedBy).to.include('/from-role/');
    } finally {
      await role.stop();
    }
  });
});
