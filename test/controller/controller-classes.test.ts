import { expect } from 'chai';
import {
  GROUP,
  VERSION,
  mergePatch,
  startControllerHarness,
  type ControllerHarness,
  type Deployment,
} from '../support/controller-harness.ts';
import { waitFor } from '../support/wait.ts';

/** The annotation as users write it (docs/kubernetes.md). */
const DEPLOYMENT_ANNOTATION = 'audittrail.dev/deployment-id';

const NAMESPACE = 'shared';

/**
 * Two releases of the service (staging and production, each with its own database) in one cluster, their
 * controllers watching all namespaces of one API server: each reconciles only the resources of its class,
 * and a resource claimed by one deployment is left alone by any other.
 */
describe('several releases in one cluster', function () {
  this.timeout(90_000);
  let harness: ControllerHarness;
  let staging: Deployment;
  let production: Deployment;

  before(async () => {
    harness = await startControllerHarness();
    staging = harness;
    production = await harness.startDeployment();
    harness.startController('staging-1', {
      controllerClass: 'staging',
      leaseName: 'audit-staging-audit-trail-controller',
      token: 'staging',
    });
    harness.startController('production-1', {
      deployment: production,
      controllerClass: 'production',
      leaseName: 'audit-production-audit-trail-controller',
      token: 'production',
    });
    // Each on its own Lease: both lead (asserted below).
    await waitFor(() => harness.controllers.every((controller) => controller.isLeader), 'both controllers to lead');
  });

  after(async () => {
    await harness?.stop();
  });

  const address = (name: string) => ({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'apikeys', name });
  const create = (name: string, controllerClass: string) =>
    harness.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NAMESPACE,
      plural: 'apikeys',
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name },
        spec: { tenantId: 'acme', scopes: ['audit:read'], secretName: `${name}-key`, controllerClass },
      },
    });
  const get = (name: string) => harness.custom.getNamespacedCustomObject(address(name));
  const active = (name: string) => waitFor(async () => (await get(name)).status?.state === 'Active', `${name} to be Active`);
  /** The writes a controller made, leader election and refused writes (a 409) aside: `PATCH /apis/.../apikeys/stg`. */
  const writes = (token: string, since = 0) =>
    harness.kube.requestLog
      .slice(since)
      .filter((entry) => entry.token === token && entry.method !== 'GET' && !entry.path.includes('/leases') && entry.status! < 400)
      .map((entry) => `${entry.method} ${entry.path}`);
  const managedKeys = async (deployment: Deployment, name: string) =>
    (
      await deployment.db.pool.query(`SELECT lookup_id, revoked_at FROM api_keys WHERE managed_by LIKE $1`, [
        `kubernetes:${NAMESPACE}/${name}/%`,
      ])
    ).rows;

  it('each release reconciles only its own class, once: one key each, and the other controller writes nothing', async () => {
    await create('stg', 'staging');
    await create('prd', 'production');
    await active('stg');
    await active('prd');
    await Promise.all([harness.reconciledAgain('apikeys', NAMESPACE, 'stg', 3), harness.reconciledAgain('apikeys', NAMESPACE, 'prd', 3)]);

    const collection = `/apis/${GROUP}/${VERSION}/namespaces/${NAMESPACE}`;
    const secrets = `/api/v1/namespaces/${NAMESPACE}`;
    // Claim (stamp and finalizer), the Secret, one Event, one status: nothing else, however many resyncs.
    expect(writes('staging')).to.deep.equal([
      `PATCH ${collection}/apikeys/stg`,
      `POST ${secrets}/secrets`,
      `POST ${secrets}/events`,
      `PATCH ${collection}/apikeys/stg/status`,
    ]);
    expect(writes('production')).to.deep.equal([
      `PATCH ${collection}/apikeys/prd`,
      `POST ${secrets}/secrets`,
      `POST ${secrets}/events`,
      `PATCH ${collection}/apikeys/prd/status`,
    ]);

    expect(await managedKeys(staging, 'stg')).to.have.length(1);
    expect(await managedKeys(staging, 'prd')).to.have.length(0);
    expect(await managedKeys(production, 'prd')).to.have.length(1);
    expect(await managedKeys(production, 'stg')).to.have.length(0);
    expect((await get('stg')).metadata.annotations).to.include({ [DEPLOYMENT_ANNOTATION]: staging.deploymentId });
    expect((await get('prd')).metadata.annotations).to.include({ [DEPLOYMENT_ANNOTATION]: production.deploymentId });
    const secret = await harness.core.readNamespacedSecret({ name: 'prd-key', namespace: NAMESPACE });
    expect(Buffer.from(secret.data!.lookupId!, 'base64').toString()).to.equal((await get('prd')).status.lookupId);
  });

  it('elects a leader per release on a Lease named after it', () => {
    expect(harness.controllers.map((controller) => controller.isLeader)).to.deep.equal([true, true]);
    const holder = (name: string) =>
      (harness.kube.store.get('coordination.k8s.io/v1/leases', 'audit-system', name).spec as { holderIdentity: string }).holderIdentity;
    expect(holder('audit-staging-audit-trail-controller')).to.equal('staging-1');
    expect(holder('audit-production-audit-trail-controller')).to.equal('production-1');
  });

  it('refuses to move a resource to another class (spec.controllerClass is immutable; absent and "default" are one class)', async () => {
    const refused = await harness.custom
      .patchNamespacedCustomObject({ ...address('stg'), body: { spec: { controllerClass: 'production' } } }, mergePatch)
      .then(
        () => undefined,
        (error: { code: number; body: string }) => error,
      );
    expect(refused?.code).to.equal(422);
    expect(String(refused?.body)).to.include('controllerClass is immutable');
  });

  it('two releases misconfigured with one class: one deployment owns the resource, the other mints nothing and records a Warning Event', async () => {
    const rogue = await harness.startDeployment();
    const controller = harness.startController('rogue-1', {
      deployment: rogue,
      controllerClass: 'staging',
      leaseName: 'audit-rogue-audit-trail-controller',
      token: 'rogue',
    });
    await waitFor(() => controller.isLeader, 'the rogue release to lead');
    const mark = harness.kube.requestLog.length;
    await create('contested', 'staging');
    await active('contested');
    await harness.reconciledAgain('apikeys', NAMESPACE, 'contested', 3);

    const owner = (await get('contested')).metadata.annotations[DEPLOYMENT_ANNOTATION];
    expect([staging.deploymentId, rogue.deploymentId]).to.include(owner);
    const [winner, loser, loserToken] = owner === staging.deploymentId ? [staging, rogue, 'rogue'] : [rogue, staging, 'staging'];
    const keys = await managedKeys(winner, 'contested');
    expect(keys).to.have.length(1);
    expect(keys[0].revoked_at).to.equal(null);
    expect(await managedKeys(loser, 'contested')).to.have.length(0);
    // The loser's only writes are Events: nothing on the resource, its status, its finalizer or its Secret.
    expect(writes(loserToken, mark).filter((write) => !write.includes('/events'))).to.deep.equal([]);
    const warnings = (
      await harness.core.listNamespacedEvent({
        namespace: NAMESPACE,
        fieldSelector: 'involvedObject.name=contested,reason=OwnedByAnotherDeployment',
      })
    ).items;
    expect(warnings).to.have.length(1);
    expect(warnings[0]!.type).to.equal('Warning');
    expect(warnings[0]!.message).to.include(loser.deploymentId).and.to.include(winner.deploymentId);
    expect(warnings[0]!.count, 'repeated at each resync, aggregated into one Event').to.be.at.least(2);
    // The staging key minted before the rogue release arrived is untouched by it.
    expect((await managedKeys(rogue, 'stg')).length).to.equal(0);
    expect((await managedKeys(staging, 'stg'))[0].revoked_at).to.equal(null);
  });
});
