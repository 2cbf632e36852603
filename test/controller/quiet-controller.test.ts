import { expect } from 'chai';
import { GROUP, VERSION, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { waitFor } from '../support/wait.ts';

const NAMESPACE = 'team-q';
/** Resources resynced at once in the request-count test. */
const FLEET = 40;

/**
 * What the controller costs the API server when nothing changes, and when the API server struggles: no
 * writes for a stable object however often it is resynced, and failed watches retried with a growing delay.
 */
describe('a quiet controller', function () {
  this.timeout(90_000);
  let harness: ControllerHarness;
  let receiver: TestReceiver;

  before(async () => {
    harness = await startControllerHarness();
    receiver = await startReceiver(204);
    harness.startController('replica-1', { resyncMs: 500 });
    await waitFor(() => harness.controllers[0]!.isLeader, 'the controller to lead');
  });

  after(async () => {
    harness?.kube.refuse();
    await receiver?.close();
    await harness?.stop();
  });

  const create = (plural: string, kind: string, name: string, spec: object) =>
    harness.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NAMESPACE,
      plural,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name }, spec },
    });
  const get = (plural: string, name: string) =>
    harness.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural, name });
  const condition = (object: any, type: string) => object.status?.conditions?.find((item: { type: string }) => item.type === type);
  const readyNames = async (plural: string) => {
    const list = (await harness.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural })) as {
      items: any[];
    };
    return new Set(list.items.filter((item) => condition(item, 'Ready')?.status === 'True').map((item) => item.metadata.name as string));
  };
  /** GETs of one Secret: what a resync did for every resource before the controller read them from its informer. */
  const secretReads = (requests: ReturnType<typeof controllerRequests>) =>
    requests.filter((entry) => entry.method === 'GET' && /\/secrets\/[^/]+$/.test(entry.path)).map((entry) => entry.path);
  const controllerRequests = (since: number) =>
    harness.kube.requestLog.slice(since).filter((entry) => entry.token === 'controller' && !entry.path.includes('/leases'));

  it('writes nothing at all while resyncing stable objects (status compared as values, not as key order)', async () => {
    await create('apikeys', 'ApiKey', 'steady', {
      tenantId: 'acme',
      scopes: ['audit:read'],
      allowedCidrs: ['10.0.0.0/8'],
      description: 'steady',
      secretName: 'steady-key',
    });
    await create('webhookendpoints', 'WebhookEndpoint', 'steady', {
      tenantId: 'acme',
      url: receiver.url,
      eventFilter: ['phi.'],
      secretName: 'steady-hook',
    });
    await waitFor(async () => condition(await get('apikeys', 'steady'), 'Ready')?.status === 'True', 'the key Ready');
    await waitFor(async () => condition(await get('webhookendpoints', 'steady'), 'Ready')?.status === 'True', 'the endpoint Ready');
    // Past the reconciles that the status writes themselves caused.
    await Promise.all([
      harness.reconciledAgain('apikeys', NAMESPACE, 'steady'),
      harness.reconciledAgain('webhookendpoints', NAMESPACE, 'steady'),
    ]);

    const mark = harness.kube.requestLog.length;
    await Promise.all([
      harness.reconciledAgain('apikeys', NAMESPACE, 'steady', 4),
      harness.reconciledAgain('webhookendpoints', NAMESPACE, 'steady', 4),
    ]);
    const requests = controllerRequests(mark);
    expect(requests.filter((entry) => entry.method !== 'GET').map((entry) => `${entry.method} ${entry.path}`)).to.deep.equal([]);
    // What the Secrets hold is known from the informer on them: four resyncs of each read none.
    expect(secretReads(requests)).to.deep.equal([]);
  });

  it('reads no Secret from the API server when it resyncs many stable resources (their informer holds them)', async () => {
    const names = Array.from({ length: FLEET }, (_, index) => `fleet-${index}`);
    await Promise.all(
      names.map((name, index) =>
        index % 2 === 0
          ? create('apikeys', 'ApiKey', name, { tenantId: 'acme', scopes: ['audit:read'], secretName: `${name}-secret` })
          : create('webhookendpoints', 'WebhookEndpoint', name, { tenantId: 'acme', url: receiver.url, secretName: `${name}-secret` }),
      ),
    );
    const plural = (index: number) => (index % 2 === 0 ? 'apikeys' : 'webhookendpoints');
    await waitFor(
      async () => {
        const ready = await Promise.all(['apikeys', 'webhookendpoints'].map((kind) => readyNames(kind)));
        return names.every((name) => ready.some((set) => set.has(name)));
      },
      `${FLEET} resources Ready`,
      60_000,
    );
    const resynced = () => Promise.all(names.map((name, index) => harness.reconciledAgain(plural(index), NAMESPACE, name, 2)));
    await resynced(); // past the reconciles that the status writes themselves caused

    const mark = harness.kube.requestLog.length;
    await resynced();
    const requests = controllerRequests(mark);
    expect(secretReads(requests), `Secret reads by ${FLEET} resources over two resyncs`).to.deep.equal([]);
    expect(requests.filter((entry) => entry.method !== 'GET').map((entry) => `${entry.method} ${entry.path}`)).to.deep.equal([]);
  });

  it('shows Reconciling=True (Ready Unknown) while it retries after an error, and Ready alone once it gets through', async () => {
    harness.kube.refuse(
      (request) => request.token === 'controller' && request.method === 'GET' && request.path.endsWith('/secrets/blocked-key'),
    );
    await create('apikeys', 'ApiKey', 'blocked', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'blocked-key' });
    await waitFor(async () => condition(await get('apikeys', 'blocked'), 'Reconciling')?.status === 'True', 'Reconciling=True');
    const retrying = await get('apikeys', 'blocked');
    expect(condition(retrying, 'Reconciling')).to.include({ reason: 'RetryingAfterError' });
    expect(condition(retrying, 'Reconciling').message).to.include('503');
    expect(condition(retrying, 'Ready')).to.include({ status: 'Unknown' });
    expect(retrying.status.observedGeneration, 'not observed while failing').to.equal(undefined);
    expect((await harness.keys.list('acme')).filter((record) => record.managedBy?.includes('/blocked/'))).to.have.length(0);

    harness.kube.refuse();
    await waitFor(async () => condition(await get('apikeys', 'blocked'), 'Ready')?.status === 'True', 'Ready=True');
    const done = await get('apikeys', 'blocked');
    expect(done.status.conditions.map((item: { type: string }) => item.type)).to.deep.equal(['Ready']);
    expect(done.status.observedGeneration).to.equal(done.metadata.generation);
  });

  it('restarts failed watches with capped exponential backoff, not at a fixed short interval', async () => {
    harness.kube.refuse((request) => request.token === 'controller' && request.watch);
    const mark = harness.kube.requestLog.length;
    harness.kube.closeWatches();
    const attemptsByWatch = () => {
      const attempts = new Map<string, number[]>();
      for (const entry of controllerRequests(mark).filter((request) => request.watch)) {
        const watched = entry.fieldSelector ? `${entry.path}?${entry.fieldSelector}` : entry.path;
        attempts.set(watched, [...(attempts.get(watched) ?? []), entry.at]);
      }
      return attempts;
    };
    // Three refused attempts of each of the twelve watches: two gaps each to compare.
    await waitFor(
      () => [...attemptsByWatch().values()].filter((times) => times.length >= 3).length >= 12,
      'three restarts of every watch',
      30_000,
    );
    const attempts = attemptsByWatch();
    // The informers of the leader (Namespaces among them), and the CRD guard's watches (one per CRD, by name)
    // that every replica runs.
    expect([...attempts.keys()].sort()).to.deep.equal([
      '/api/v1/namespaces',
      '/api/v1/secrets',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions?metadata.name=apikeys.audittrail.dev',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions?metadata.name=auditlogstreams.audittrail.dev',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions?metadata.name=legalholds.audittrail.dev',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions?metadata.name=retentionpolicies.audittrail.dev',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions?metadata.name=webhookendpoints.audittrail.dev',
      `/apis/${GROUP}/${VERSION}/apikeys`,
      `/apis/${GROUP}/${VERSION}/auditlogstreams`,
      `/apis/${GROUP}/${VERSION}/legalholds`,
      `/apis/${GROUP}/${VERSION}/retentionpolicies`,
      `/apis/${GROUP}/${VERSION}/webhookendpoints`,
    ]);
    for (const [path, times] of attempts) {
      const gaps = times.slice(1).map((time, index) => time - times[index]!);
      // 800 ms doubling (with up to 100 % jitter): never sooner than the first delay, each no shorter than the one before.
      for (const gap of gaps) expect(gap, `${path} gaps ${gaps.join(', ')}`).to.be.at.least(700);
      for (let index = 1; index < gaps.length; index += 1)
        expect(gaps[index], `${path} gaps ${gaps.join(', ')}`).to.be.at.least(gaps[index - 1]! * 0.9);
    }

    harness.kube.refuse();
    await create('apikeys', 'ApiKey', 'after-outage', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'after-outage-key' });
    await waitFor(
      async () => condition(await get('apikeys', 'after-outage'), 'Ready')?.status === 'True',
      'reconciled once the watches are back',
      40_000,
    );
  });
});
