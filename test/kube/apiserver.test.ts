import { expect } from 'chai';
import {
  ApiextensionsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { startKubeApiServer, type KubeApiServer } from '../support/kube-apiserver/server.ts';

/** The API stand-in's own contract, through the real client where the controller uses it. */
describe('Kubernetes API stand-in', function () {
  this.timeout(20_000);
  let kube: KubeApiServer;
  let custom: CustomObjectsApi;
  const address = { group: 'audittrail.dev', version: 'v1alpha1', namespace: 'ns', plural: 'apikeys' };
  const spec = { tenantId: 'acme', scopes: ['audit:read'], secretName: 'k' };
  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (error: { code: number; body: string }) => error,
    );

  before(async () => {
    kube = await startKubeApiServer({ crdDirectories: ['crds'] });
    custom = kube.kubeConfig().makeApiClient(CustomObjectsApi);
  });

  after(async () => {
    await kube?.stop();
  });

  it('bumps generation on spec changes only, and keeps status out of the main resource', async () => {
    const created = await custom.createNamespacedCustomObject({
      ...address,
      body: { apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'gen' }, spec },
    });
    expect(created.metadata.generation).to.equal(1);
    const withStatus = await custom.patchNamespacedCustomObjectStatus(
      { ...address, name: 'gen', body: { status: { state: 'Active' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(withStatus.metadata.generation).to.equal(1);
    expect(withStatus.status.state).to.equal('Active');
    const labelled = await custom.patchNamespacedCustomObject(
      { ...address, name: 'gen', body: { metadata: { labels: { a: 'b' } }, status: { state: 'Revoked' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(labelled.metadata.generation).to.equal(1);
    expect(labelled.status.state, 'status ignored on the main resource').to.equal('Active');
    const changed = await custom.patchNamespacedCustomObject(
      {
        ...address,
        name: 'gen',
        body: [
          { op: 'test', path: '/spec/tenantId', value: 'acme' },
          { op: 'replace', path: '/spec/description', value: 'x' },
        ],
      },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    expect(changed.metadata.generation).to.equal(2);
    expect(changed.spec.description).to.equal('x');
  });

  it('answers 409 to a write from a stale resourceVersion and to a duplicate create', async () => {
    const current = await custom.getNamespacedCustomObject({ ...address, name: 'gen' });
    await custom.replaceNamespacedCustomObject({
      ...address,
      name: 'gen',
      body: { ...current, spec: { ...current.spec, description: 'first' } },
    });
    const stale = await refusal(
      custom.replaceNamespacedCustomObject({
        ...address,
        name: 'gen',
        body: { ...current, spec: { ...current.spec, description: 'second' } },
      }),
    );
    expect(stale?.code).to.equal(409);
    expect(JSON.parse(stale!.body)).to.include({ kind: 'Status', reason: 'Conflict', code: 409 });
    const duplicate = await refusal(
      custom.createNamespacedCustomObject({
        ...address,
        body: { apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'gen' }, spec },
      }),
    );
    expect(JSON.parse(duplicate!.body).reason).to.equal('AlreadyExists');
  });

  it('holds deletion for finalizers and refuses new finalizers meanwhile', async () => {
    await custom.createNamespacedCustomObject({
      ...address,
      body: { apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'fin', finalizers: ['x/one'] }, spec },
    });
    await custom.deleteNamespacedCustomObject({ ...address, name: 'fin' });
    const deleting = await custom.getNamespacedCustomObject({ ...address, name: 'fin' });
    expect(deleting.metadata.deletionTimestamp).to.be.a('string');
    const added = await refusal(
      custom.patchNamespacedCustomObject(
        { ...address, name: 'fin', body: { metadata: { finalizers: ['x/one', 'x/two'] } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    expect(added?.code).to.equal(422);
    await custom.patchNamespacedCustomObject(
      { ...address, name: 'fin', body: { metadata: { finalizers: [] } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect((await refusal(custom.getNamespacedCustomObject({ ...address, name: 'fin' })))?.code).to.equal(404);
  });

  it('streams watch events from a resourceVersion with bookmarks, and 410 Gone after compaction', async () => {
    const list = await custom.listNamespacedCustomObject(address);
    const from = list.metadata.resourceVersion;
    await custom.createNamespacedCustomObject({
      ...address,
      body: { apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'watched' }, spec },
    });
    const response = await fetch(
      `${kube.url}/apis/audittrail.dev/v1alpha1/namespaces/ns/apikeys?watch=true&resourceVersion=${from}&allowWatchBookmarks=true&timeoutSeconds=2`,
    );
    const lines = (await response.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines[0]).to.deep.include({ type: 'ADDED' });
    expect(lines[0].object.metadata.name).to.equal('watched');
    expect(lines.some((event) => event.type === 'BOOKMARK')).to.equal(true);

    kube.compact();
    const gone = await (
      await fetch(`${kube.url}/apis/audittrail.dev/v1alpha1/namespaces/ns/apikeys?watch=true&resourceVersion=${from}`)
    ).text();
    expect(JSON.parse(gone.trim())).to.deep.include({ type: 'ERROR' });
    expect(JSON.parse(gone.trim()).object).to.include({ code: 410 });
  });

  it('serves custom resources with their keys sorted at every level, as the real server encodes unstructured objects', async () => {
    const created = await custom.createNamespacedCustomObject({
      ...address,
      body: {
        spec: { tenantId: 'acme', secretName: 'k', scopes: ['audit:read'] },
        metadata: { name: 'sorted', labels: { z: '1', a: '2' } },
        kind: 'ApiKey',
        apiVersion: 'audittrail.dev/v1alpha1',
      },
    });
    const patched = await custom.patchNamespacedCustomObjectStatus(
      {
        ...address,
        name: 'sorted',
        body: {
          status: {
            state: 'Active',
            lookupId: '1a2b3c4d',
            conditions: [{ type: 'Ready', status: 'True', reason: 'Active', message: 'm', lastTransitionTime: '2026-01-01T00:00:00Z' }],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const text = await (await fetch(`${kube.url}/apis/audittrail.dev/v1alpha1/namespaces/ns/apikeys/sorted`)).text();
    const keysInOrder = (value: unknown): string[][] =>
      value !== null && typeof value === 'object'
        ? Array.isArray(value)
          ? value.flatMap(keysInOrder)
          : [Object.keys(value), ...Object.values(value).flatMap(keysInOrder)]
        : [];
    for (const keys of keysInOrder(JSON.parse(text))) expect(keys).to.deep.equal([...keys].sort());
    expect(Object.keys(created)).to.deep.equal(['apiVersion', 'kind', 'metadata', 'spec']);
    expect(Object.keys(patched.status)).to.deep.equal(['conditions', 'lookupId', 'state']);
    // Built-in types keep their field order (typed structs): a Secret's metadata comes first.
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({ namespace: 'ns', body: { metadata: { name: 'plain' }, type: 'Opaque', stringData: { b: '1' } } });
    expect(Object.keys(JSON.parse(await (await fetch(`${kube.url}/api/v1/namespaces/ns/secrets/plain`)).text()))[0]).to.equal('metadata');
  });

  it('treats a write that changes nothing but key order as a no-op (no new resourceVersion)', async () => {
    const before = await custom.getNamespacedCustomObject({ ...address, name: 'sorted' });
    const reversed = Object.fromEntries(Object.entries(before.status).reverse());
    const after = await custom.replaceNamespacedCustomObjectStatus({ ...address, name: 'sorted', body: { ...before, status: reversed } });
    expect(after.metadata.resourceVersion).to.equal(before.metadata.resourceVersion);
  });

  it('honours label selectors on list and watch: an object that starts or stops matching arrives as ADDED or DELETED', async () => {
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    const secret = (name: string, labels: Record<string, string>) => ({
      metadata: { name, labels },
      type: 'Opaque',
      stringData: { v: name },
    });
    await core.createNamespacedSecret({
      namespace: 'sel',
      body: secret('owned', { 'app.kubernetes.io/managed-by': 'audit-trail-controller', tier: 'a' }),
    });
    await core.createNamespacedSecret({ namespace: 'sel', body: secret('foreign', { tier: 'b' }) });
    await core.createNamespacedSecret({ namespace: 'sel', body: secret('bare', {}) });
    const names = async (labelSelector: string) =>
      (await core.listNamespacedSecret({ namespace: 'sel', labelSelector })).items.map((item) => item.metadata!.name).sort();
    expect(await names('app.kubernetes.io/managed-by=audit-trail-controller')).to.deep.equal(['owned']);
    expect(await names('app.kubernetes.io/managed-by==audit-trail-controller,tier=a')).to.deep.equal(['owned']);
    expect(await names('tier!=a')).to.deep.equal(['bare', 'foreign']);
    expect(await names('tier in (a,b)')).to.deep.equal(['foreign', 'owned']);
    expect(await names('tier notin (a)')).to.deep.equal(['bare', 'foreign']);
    expect(await names('tier')).to.deep.equal(['foreign', 'owned']);
    expect(await names('!tier')).to.deep.equal(['bare']);
    expect((await refusal(core.listNamespacedSecret({ namespace: 'sel', labelSelector: 'tier in ()' })))?.code).to.equal(400);

    const from = (await core.listNamespacedSecret({ namespace: 'sel' })).metadata!.resourceVersion;
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    await core.patchNamespacedSecret({ name: 'bare', namespace: 'sel', body: { metadata: { labels: { tier: 'a' } } } }, merge);
    await core.patchNamespacedSecret({ name: 'bare', namespace: 'sel', body: { stringData: { v: 'changed' } } }, merge);
    await core.patchNamespacedSecret({ name: 'bare', namespace: 'sel', body: { metadata: { labels: { tier: null } } } }, merge);
    await core.patchNamespacedSecret({ name: 'foreign', namespace: 'sel', body: { stringData: { v: 'unseen' } } }, merge);
    const response = await fetch(
      `${kube.url}/api/v1/namespaces/sel/secrets?watch=true&resourceVersion=${from}&labelSelector=tier%3Da&timeoutSeconds=1`,
    );
    const events = (await response.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(events.map((event) => `${event.type} ${event.object.metadata.name}`)).to.deep.equal([
      'ADDED bare',
      'MODIFIED bare',
      'DELETED bare',
    ]);
    expect(events[2].object.metadata.labels).to.deep.equal({ tier: 'a' });
  });

  it('honours field selectors on metadata and the fields a built-in type supports, and refuses others with 400', async () => {
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    expect(
      (await core.listNamespacedSecret({ namespace: 'sel', fieldSelector: 'metadata.name=owned' })).items.map(
        (item) => item.metadata!.name,
      ),
    ).to.deep.equal(['owned']);
    expect((await core.listNamespacedSecret({ namespace: 'sel', fieldSelector: 'metadata.name!=owned,type=Opaque' })).items).to.have.length(
      2,
    );
    expect(
      (
        await custom.listClusterCustomObject({
          group: 'audittrail.dev',
          version: 'v1alpha1',
          plural: 'apikeys',
          fieldSelector: 'metadata.name=gen',
        })
      ).items.map((item: any) => item.metadata.name),
    ).to.deep.equal(['gen']);
    await core.createNamespacedEvent({
      namespace: 'sel',
      body: {
        metadata: { name: 'e1' },
        involvedObject: { kind: 'ApiKey', name: 'gen', namespace: 'sel' },
        reason: 'KeyMinted',
        type: 'Normal',
      },
    });
    expect(
      (await core.listNamespacedEvent({ namespace: 'sel', fieldSelector: 'involvedObject.name=gen,reason=KeyMinted' })).items,
    ).to.have.length(1);
    const unsupported = await refusal(core.listNamespacedSecret({ namespace: 'sel', fieldSelector: 'spec.whatever=x' }));
    expect(unsupported?.code).to.equal(400);
    expect(JSON.parse(unsupported!.body).message).to.equal('field label not supported: spec.whatever');
    const onCustom = await refusal(
      custom.listClusterCustomObject({
        group: 'audittrail.dev',
        version: 'v1alpha1',
        plural: 'apikeys',
        fieldSelector: 'spec.tenantId=acme',
      }),
    );
    expect(onCustom?.code).to.equal(400);
  });

  it('answers 503 to the requests a test refuses, and serves them again afterwards', async () => {
    kube.refuse((request) => request.watch);
    const refused = await fetch(`${kube.url}/apis/audittrail.dev/v1alpha1/apikeys?watch=true`);
    expect(refused.status).to.equal(503);
    expect(
      (await custom.listClusterCustomObject({ group: 'audittrail.dev', version: 'v1alpha1', plural: 'apikeys' })).items.length,
    ).to.be.greaterThan(0);
    kube.refuse();
    const served = await fetch(`${kube.url}/apis/audittrail.dev/v1alpha1/apikeys?watch=true&timeoutSeconds=1`);
    expect(served.status).to.equal(200);
    await served.text();
  });

  it('keeps Leases with optimistic concurrency', async () => {
    const leases = kube.kubeConfig().makeApiClient(CoordinationV1Api);
    const lease = await leases.createNamespacedLease({
      namespace: 'ns',
      body: { metadata: { name: 'l' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 15 } },
    });
    await leases.replaceNamespacedLease({ name: 'l', namespace: 'ns', body: { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } } });
    const stale = await refusal(
      leases.replaceNamespacedLease({ name: 'l', namespace: 'ns', body: { ...lease, spec: { ...lease.spec, holderIdentity: 'c' } } }),
    );
    expect(stale?.code).to.equal(409);
    expect((await leases.readNamespacedLease({ name: 'l', namespace: 'ns' })).spec?.holderIdentity).to.equal('b');
  });

  it('prunes what the stored CRD does not declare, and serves a replaced CRD from the next request on', async () => {
    const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    const created = await custom.createNamespacedCustomObject({
      ...address,
      body: { apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'pruned' }, spec: { ...spec, unknown: 'x' } },
    });
    expect(created.spec).to.deep.equal(spec);
    const status = await custom.patchNamespacedCustomObjectStatus(
      { ...address, name: 'pruned', body: { status: { state: 'Active', rotateRequest: '1', bogus: { nested: true } } } },
      mergePatch,
    );
    expect(status.status).to.deep.equal({ state: 'Active', rotateRequest: '1' });

    // An older CRD, without status.rotateRequest: the field is dropped on the next write, as a real API server does.
    const crds = kube.kubeConfig().makeApiClient(ApiextensionsV1Api);
    const crd = await crds.readCustomResourceDefinition({ name: 'apikeys.audittrail.dev' });
    delete crd.spec.versions[0]!.schema!.openAPIV3Schema!.properties!.status!.properties!.rotateRequest;
    await crds.replaceCustomResourceDefinition({ name: 'apikeys.audittrail.dev', body: crd });
    const rewritten = await custom.patchNamespacedCustomObjectStatus(
      { ...address, name: 'pruned', body: { status: { lookupId: '0a1b2c3d', rotateRequest: '2' } } },
      mergePatch,
    );
    expect(rewritten.status).to.deep.equal({ state: 'Active', lookupId: '0a1b2c3d' });
    expect((await crds.listCustomResourceDefinition({ fieldSelector: 'metadata.name=apikeys.audittrail.dev' })).items).to.have.length(1);
  });
});
