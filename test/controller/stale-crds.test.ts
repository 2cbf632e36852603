import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { KubernetesController } from '../../src/controller/controller.ts';
import { ServiceMetrics } from '../../src/platform/metrics.ts';
import {
  GROUP,
  VERSION,
  mergePatch,
  resourceAddress,
  startControllerHarness,
  type ControllerHarness,
} from '../support/controller-harness.ts';
import { kubernetesBinaries } from '../support/k8s-binaries.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { waitFor } from '../support/wait.ts';
import { controllerMetrics } from '../../src/controller/controllerMetrics.ts';

const run = promisify(execFile);
const NAMESPACE = 'team-s';

/**
 * The CRDs of an earlier release (crds/ at 8e1febc: before controller classes and status.rotateRequest), as
 * a plain `helm upgrade` leaves them: the stand-in prunes what they do not declare, as the API server does.
 * With them, the controller minted 235 keys for one rotate annotation; this one reconciles nothing
 * until the CRDs are upgraded, and says so everywhere an operator looks.
 */
const EARLIER_CRDS = 'test/controller/fixtures/crds-8e1febc';

/** The controller's readiness check of its CRDs (beside the one of its Lease). */
const crdReadiness = (controller: KubernetesController) => controller.readiness.find((check) => check.name === 'crds')!;

describe('a controller whose CRDs are older than it needs', function () {
  this.timeout(90_000);
  let harness: ControllerHarness;
  let receiver: TestReceiver;
  let cacheDir: string;
  const metrics = new ServiceMetrics();

  before(async () => {
    cacheDir = mkdtempSync(join(tmpdir(), 'kubectl-cache-'));
    harness = await startControllerHarness({}, { crdDirectories: [EARLIER_CRDS] });
    receiver = await startReceiver(204);
  });

  after(async () => {
    await receiver?.close();
    await harness?.stop();
    if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
  });

  const address = (plural: string, name?: string) => resourceAddress(NAMESPACE, plural, name);
  const get = (plural: string, name: string) => harness.custom.getNamespacedCustomObject(address(plural, name) as never);
  const condition = (object: any, type: string) => object.status?.conditions?.find((item: { type: string }) => item.type === type);
  const events = async (name: string, reason: string) =>
    (await harness.core.listNamespacedEvent({ namespace: NAMESPACE, fieldSelector: `involvedObject.name=${name},reason=${reason}` })).items;
  const managedKeys = async (name: string) =>
    (
      await harness.db.pool.query(`SELECT lookup_id, revoked_at FROM api_keys WHERE managed_by LIKE $1`, [
        `kubernetes:${NAMESPACE}/${name}/%`,
      ])
    ).rows;
  const managedEndpoints = async (name: string) =>
    (await harness.db.pool.query(`SELECT id FROM webhook_endpoints WHERE managed_by LIKE $1`, [`kubernetes:${NAMESPACE}/${name}/%`])).rows;
  const outdatedGauge = async () =>
    Object.fromEntries(
      (await controllerMetrics(metrics).crdOutdated.get()).values.map((sample) => [sample.labels.crd as string, sample.value]),
    );
  /** The controller's writes other than to its Lease and refused ones: `PATCH /apis/.../apikeys/siem/status`. */
  const writes = (since: number) =>
    harness.kube.requestLog
      .slice(since)
      .filter((entry) => entry.token === 'controller' && entry.method !== 'GET' && !entry.path.includes('/leases') && entry.status! < 400)
      .map((entry) => `${entry.method} ${entry.path}`);

  it('mints, rotates and registers nothing, and says why on each resource, in an Event, a metric, readiness and its log', async () => {
    await harness.custom.createNamespacedCustomObject({
      ...address('apikeys'),
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name: 'siem', annotations: { 'audittrail.dev/rotate': '1' } },
        spec: { tenantId: 'acme', scopes: ['audit:read'], secretName: 'siem-key' },
      },
    });
    await harness.custom.createNamespacedCustomObject({
      ...address('webhookendpoints'),
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'WebhookEndpoint',
        metadata: { name: 'hook' },
        spec: { tenantId: 'acme', url: receiver.url, secretName: 'hook-secret' },
      },
    });
    const mark = harness.kube.requestLog.length;
    const controller = harness.startController('replica-1', { metrics });
    await waitFor(async () => condition(await get('apikeys', 'siem'), 'Stalled')?.reason === 'CRDOutdated', 'siem to be Stalled');
    await waitFor(async () => condition(await get('webhookendpoints', 'hook'), 'Stalled')?.reason === 'CRDOutdated', 'hook to be Stalled');

    // A user asks for a rotation meanwhile: with status.rotateRequest pruned, every reconcile would see it anew.
    await harness.custom.patchNamespacedCustomObject(
      { ...address('apikeys', 'siem'), body: { metadata: { annotations: { 'audittrail.dev/rotate': '2' } } } } as never,
      mergePatch,
    );
    await waitFor(async () => (await events('siem', 'CRDOutdated')).length > 0, 'a Warning Event on siem');
    await harness.reconciledAgain('apikeys', NAMESPACE, 'siem', 3);
    await harness.reconciledAgain('webhookendpoints', NAMESPACE, 'hook', 3);

    const siem = await get('apikeys', 'siem');
    expect(condition(siem, 'Ready')).to.include({ status: 'False', reason: 'CRDOutdated' });
    expect(condition(siem, 'Ready').message).to.include('CRD apikeys.audittrail.dev carries no schema version');
    expect(condition(siem, 'Ready').message).to.include('kubectl apply --server-side --force-conflicts -f crds/');
    expect((await events('hook', 'CRDOutdated'))[0]?.type).to.equal('Warning');
    // Nothing in the database, no Secret, no claim (stamp or finalizer): only status and Events were written.
    expect(await managedKeys('siem')).to.deep.equal([]);
    expect(await managedEndpoints('hook')).to.deep.equal([]);
    const secrets = await harness.core.listNamespacedSecret({ namespace: NAMESPACE });
    expect(secrets.items).to.deep.equal([]);
    expect(siem.metadata.finalizers ?? []).to.deep.equal([]);
    expect(siem.metadata.annotations).not.to.have.property('audittrail.dev/deployment-id');
    const written = writes(mark);
    expect(written.length).to.be.greaterThan(0);
    expect(written.filter((write) => !write.endsWith('/status') && !write.includes('/events'))).to.deep.equal([]);
    // Not ready, naming both CRDs and the fix; the metric says which.
    const readiness = await crdReadiness(controller)
      .check()
      .then(
        () => 'ready',
        (error: Error) => error.message,
      );
    expect(readiness)
      .to.include('CRD apikeys.audittrail.dev carries no schema version')
      .and.to.include('webhookendpoints.audittrail.dev')
      .and.to.include('auditlogstreams.audittrail.dev');
    // The earlier release had no RetentionPolicy, LegalHold or AuditLogStream: their CRDs are missing, counted the same way.
    expect(await outdatedGauge()).to.deep.equal({
      'apikeys.audittrail.dev': 1,
      'webhookendpoints.audittrail.dev': 1,
      'retentionpolicies.audittrail.dev': 1,
      'auditlogstreams.audittrail.dev': 1,
      'legalholds.audittrail.dev': 1,
    });
  });

  it('reconciles once the CRDs are upgraded with the documented kubectl command: one key, no rotation, one endpoint', async () => {
    const { stdout } = await run(kubernetesBinaries().kubectl, [
      '--kubeconfig',
      harness.kube.kubeconfigPath,
      '--cache-dir',
      cacheDir,
      'apply',
      '--server-side',
      '--force-conflicts',
      '--validate=false',
      '-f',
      'crds/',
    ]);
    expect(stdout).to.include('customresourcedefinition.apiextensions.k8s.io/apikeys.audittrail.dev serverside-applied');
    // The CRD watch brings the change: no resync, no restart needed.
    await waitFor(async () => (await get('apikeys', 'siem')).status?.state === 'Active', 'siem to be Active', 20_000);
    await waitFor(async () => (await get('webhookendpoints', 'hook')).status?.active === true, 'hook to be active', 20_000);
    await harness.reconciledAgain('apikeys', NAMESPACE, 'siem', 3);

    const siem = await get('apikeys', 'siem');
    const keys = await managedKeys('siem');
    expect(keys).to.have.length(1);
    expect(keys[0].revoked_at).to.equal(null);
    expect(siem.status.lookupId).to.equal(keys[0].lookup_id);
    // The annotation was there before the first key: it asks for nothing more, and is now remembered.
    expect(siem.status.rotateRequest).to.equal('2');
    expect(condition(siem, 'Ready')).to.include({ status: 'True', reason: 'Active' });
    expect(condition(siem, 'Stalled')).to.equal(undefined);
    expect(await managedEndpoints('hook')).to.have.length(1);
    await crdReadiness(harness.controllers[0]!).check();
    expect(await outdatedGauge()).to.deep.equal({
      'apikeys.audittrail.dev': 0,
      'webhookendpoints.audittrail.dev': 0,
      'retentionpolicies.audittrail.dev': 0,
      'auditlogstreams.audittrail.dev': 0,
      'legalholds.audittrail.dev': 0,
    });
  });

  it('refuses as well while it cannot read the CRDs, and goes on by itself once it can', async () => {
    const second = await harness.startDeployment();
    harness.kube.refuse((request) => request.token === 'reader' && request.path.includes('/customresourcedefinitions'));
    const controller = harness.startController('reader-1', {
      deployment: second,
      controllerClass: 'reader',
      leaseName: 'reader-controller',
      token: 'reader',
      watchBackoff: { initialMs: 200, maxMs: 400, resetAfterMs: 60_000, spread: [1, 1] },
    });
    await harness.custom.createNamespacedCustomObject({
      ...address('apikeys'),
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name: 'unread' },
        spec: { tenantId: 'acme', scopes: ['audit:read'], secretName: 'unread-key', controllerClass: 'reader' },
      },
    });
    await waitFor(async () => condition(await get('apikeys', 'unread'), 'Stalled')?.reason === 'CRDUnreadable', 'unread to be Stalled');
    const message = await crdReadiness(controller)
      .check()
      .then(
        () => 'ready',
        (error: Error) => error.message,
      );
    expect(message).to.include('CRD apikeys.audittrail.dev cannot be read (the Kubernetes API answered 503)');
    expect((await second.db.pool.query('SELECT count(*)::int AS n FROM api_keys')).rows[0].n).to.equal(0);

    harness.kube.refuse();
    await waitFor(async () => (await get('apikeys', 'unread')).status?.state === 'Active', 'unread to be Active', 20_000);
    await crdReadiness(controller).check();
  });
});
