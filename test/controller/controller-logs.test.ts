import { expect } from 'chai';
import { GROUP, VERSION, mergePatch, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { captureLog } from '../support/log-capture.ts';
import { waitFor } from '../support/wait.ts';

const NAMESPACE = 'team-l';

interface LogLine {
  level: string;
  msg: string;
  object?: string;
  watch?: string;
  err?: { code?: number; name?: string };
}

/**
 * What the controller logs about things that are not failures: a watch it stopped itself, and a resource
 * that went away while it was removing its finalizer. Operators alert on warnings; these must not make any.
 */
describe('what the controller does not report as a failure', function () {
  this.timeout(90_000);
  let harness: ControllerHarness;
  const captured = captureLog<LogLine>('debug');
  const lines = captured.lines;
  const capture = () => captured.log;
  const address = (name: string) => ({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'apikeys', name });
  const create = (name: string) =>
    harness.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NAMESPACE,
      plural: 'apikeys',
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name },
        spec: { tenantId: 'acme', scopes: ['audit:read'], secretName: `${name}-key` },
      },
    });
  const ready = async (name: string) =>
    ((await harness.custom.getNamespacedCustomObject(address(name))) as any).status?.conditions?.some(
      (condition: { type: string; status: string }) => condition.type === 'Ready' && condition.status === 'True',
    );

  beforeEach(async () => {
    captured.clear();
    harness = await startControllerHarness();
  });

  afterEach(async () => {
    harness?.kube.refuse();
    await harness?.stop();
  });

  it('logs no "watch failed" when it stops its own watches at shutdown', async () => {
    const controller = harness.startController('replica-1', { log: capture() });
    await waitFor(() => controller.isLeader, 'the controller to lead');
    await create('shutdown');
    await waitFor(() => ready('shutdown'), 'the key Ready', 30_000);
    // Every watch is open: the informers of both kinds, of the owned Secrets, and the CRD guard's.
    await waitFor(
      () => harness.kube.requestLog.filter((entry) => entry.token === 'controller' && entry.watch && !entry.status).length >= 5,
      'five open watches',
    );

    await controller.stop();
    expect(lines().filter((line) => line.msg.startsWith('watch failed'))).to.deep.equal([]);
    expect(lines().filter((line) => line.level === 'warn' || line.level === 'error')).to.deep.equal([]);
  });

  it('takes a 404 while removing its finalizer as the resource gone, not as a reconcile failure to retry', async () => {
    const controller = harness.startController('replica-1', { log: capture() });
    await waitFor(() => controller.isLeader, 'the controller to lead');
    await create('gone');
    await waitFor(() => ready('gone'), 'the key Ready', 30_000);
    const controllerPatchOfGone = (request: { token: string; method: string; path: string }) =>
      request.token === 'controller' && request.method === 'PATCH' && request.path.endsWith('/apikeys/gone');
    const apiKeysCollection = (request: { token: string; path: string }) =>
      request.token === 'controller' && request.path === `/apis/${GROUP}/${VERSION}/apikeys`;

    // The controller sees the deletion and revokes the key, but cannot remove its finalizer yet (503).
    harness.kube.refuse(controllerPatchOfGone);
    await harness.custom.deleteNamespacedCustomObject(address('gone'));
    await waitFor(
      () => harness.kube.requestLog.some((entry) => controllerPatchOfGone(entry) && entry.status === 503),
      'a refused finalizer removal',
      30_000,
    );
    // Its view of ApiKeys stops there; meanwhile someone removes the finalizer by hand and the object goes.
    harness.kube.refuse((request) => controllerPatchOfGone(request) || apiKeysCollection(request));
    harness.kube.closeWatches();
    await harness.custom.patchNamespacedCustomObject({ ...address('gone'), body: { metadata: { finalizers: null } } }, mergePatch);
    await waitFor(
      () =>
        harness.custom.getNamespacedCustomObject(address('gone')).then(
          () => false,
          (error: { code?: number }) => error.code === 404,
        ),
      'the ApiKey deleted',
    );

    // Its retry, from the copy it still holds, now finds nothing to patch.
    const mark = lines().length;
    harness.kube.refuse(apiKeysCollection);
    await waitFor(
      () => harness.kube.requestLog.some((entry) => controllerPatchOfGone(entry) && entry.status === 404),
      'the finalizer removal answered 404',
      30_000,
    );
    await harness.reconciledAgain('apikeys', NAMESPACE, 'gone', 1);
    const failures = lines().filter((line) => line.msg.startsWith('reconcile failed'));
    expect(failures.map((line) => line.err?.code)).to.include(503); // the log is captured: the refusals were failures
    const since = lines().slice(mark);
    // A refused patch still in flight at the mark may be logged after it: those are the 503s asked for above.
    const reported = since.filter((line) => line.msg.startsWith('reconcile failed') && line.err?.code !== 503);
    expect(reported.map((line) => line.err?.code)).to.deep.equal([]);
    // Done, not retried with backoff: its key stays revoked and nothing else is asked of the API server for it.
    const revoked = await harness.keys.list('acme');
    expect(revoked.filter((record) => record.managedBy?.includes('/gone/')).map((record) => record.revokedAt !== null)).to.deep.equal([
      true,
    ]);
  });
});
