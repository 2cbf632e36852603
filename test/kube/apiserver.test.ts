import { expect } from 'chai';
import { CoordinationV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { startKubeApiServer, type KubeApiServer } from '../support/kube-apiserver/server.ts';

/** The API stand-in's own contract, through the real client where the controller uses it. */
describe('Kubernetes API stand-in', function () {
  this.timeout(20_000);
  let kube: KubeApiServer;
  let custom: CustomObjectsApi;
  const address = { group: 'audittrail.dev', version: 'v1alpha1', namespace: 'ns', plural: 'apikeys' };
  const spec = { tenantId: 'acme', scopes: ['audit:read'], secretName: 'k' };
  const refusal = (promise: Promise<unknown>) => promise.then(() => undefined, (error: { code: number; body: string }) => error);

  before(async () => {
    kube = await startKubeApiServer({ crdDirectories: ['crds'] });
    custom = kube.kubeConfig().makeApiClient(CustomObjectsApi);
  });

  after(async () => {
    await kube?.stop();
  });

  it('bumps generation on spec changes only, and keeps status out of the main resource', async () => {
    const created = await custom.createNamespacedCustomObject({ ...address, body: { apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'gen' }, spec } });
    expect(created.metadata.generation).to.equal(1);
    const withStatus = await custom.patchNamespacedCustomObjectStatus({ ...address, name: 'gen', body: { status: { state: 'Active' } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    expect(withStatus.metadata.generation).to.equal(1);
    expect(withStatus.status.state).to.equal('Active');
    const labelled = await custom.patchNamespacedCustomObject({ ...address, name: 'gen', body: { metadata: { labels: { a: 'b' } }, status: { state: 'Revoked' } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    expect(labelled.metadata.generation).to.equal(1);
    expect(labelled.status.state, 'status ignored on the main resource').to.equal('Active');
    const changed = await custom.patchNamespacedCustomObject(
      { ...address, name: 'gen', body: [{ op: 'test', path: '/spec/tenantId', value: 'acme' }, { op: 'replace', path: '/spec/description', value: 'x' }] },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    expect(changed.metadata.generation).to.equal(2);
    expect(changed.spec.description).to.equal('x');
  });

  it('answers 409 to a write from a stale resourceVersion and to a duplicate create', async () => {
    const current = await custom.getNamespacedCustomObject({ ...address, name: 'gen' });
    await custom.replaceNamespacedCustomObject({ ...address, name: 'gen', body: { ...current, spec: { ...current.spec, description: 'first' } } });
    const stale = await refusal(custom.replaceNamespacedCustomObject({ ...address, name: 'gen', body: { ...current, spec: { ...current.spec, description: 'second' } } }));
    expect(stale?.code).to.equal(409);
    expect(JSON.parse(stale!.body)).to.include({ kind: 'Status', reason: 'Conflict', code: 409 });
    const duplicate = await refusal(custom.createNamespacedCustomObject({ ...address, body: { apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'gen' }, spec } }));
    expect(JSON.parse(duplicate!.body).reason).to.equal('AlreadyExists');
  });

  it('holds deletion for finalizers and refuses new finalizers meanwhile', async () => {
    await custom.createNamespacedCustomObject({ ...address, body: { apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'fin', finalizers: ['x/one'] }, spec } });
    await custom.deleteNamespacedCustomObject({ ...address, name: 'fin' });
    const deleting = await custom.getNamespacedCustomObject({ ...address, name: 'fin' });
    expect(deleting.metadata.deletionTimestamp).to.be.a('string');
    const added = await refusal(custom.patchNamespacedCustomObject({ ...address, name: 'fin', body: { metadata: { finalizers: ['x/one', 'x/two'] } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch)));
    expect(added?.code).to.equal(422);
    await custom.patchNamespacedCustomObject({ ...address, name: 'fin', body: { metadata: { finalizers: [] } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    expect((await refusal(custom.getNamespacedCustomObject({ ...address, name: 'fin' })))?.code).to.equal(404);
  });

  it('streams watch events from a resourceVersion with bookmarks, and 410 Gone after compaction', async () => {
    const list = await custom.listNamespacedCustomObject(address);
    const from = list.metadata.resourceVersion;
    await custom.createNamespacedCustomObject({ ...address, body: { apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'watched' }, spec } });
    const response = await fetch(`${kube.url}/apis/audittrail.dev/v1alpha1/namespaces/ns/apikeys?watch=true&resourceVersion=${from}&allowWatchBookmarks=true&timeoutSeconds=2`);
    const lines = (await response.text()).trim().split('\n').map((line) => JSON.parse(line));
    expect(lines[0]).to.deep.include({ type: 'ADDED' });
    expect(lines[0].object.metadata.name).to.equal('watched');
    expect(lines.some((event) => event.type === 'BOOKMARK')).to.equal(true);

    kube.compact();
    const gone = await (await fetch(`${kube.url}/apis/audittrail.dev/v1alpha1/namespaces/ns/apikeys?watch=true&resourceVersion=${from}`)).text();
    expect(JSON.parse(gone.trim())).to.deep.include({ type: 'ERROR' });
    expect(JSON.parse(gone.trim()).object).to.include({ code: 410 });
  });

  it('keeps Leases with optimistic concurrency', async () => {
    const leases = kube.kubeConfig().makeApiClient(CoordinationV1Api);
    const lease = await leases.createNamespacedLease({ namespace: 'ns', body: { metadata: { name: 'l' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 15 } } });
    await leases.replaceNamespacedLease({ name: 'l', namespace: 'ns', body: { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } } });
    const stale = await refusal(leases.replaceNamespacedLease({ name: 'l', namespace: 'ns', body: { ...lease, spec: { ...lease.spec, holderIdentity: 'c' } } }));
    expect(stale?.code).to.equal(409);
    expect((await leases.readNamespacedLease({ name: 'l', namespace: 'ns' })).spec?.holderIdentity).to.equal('b');
  });
});
