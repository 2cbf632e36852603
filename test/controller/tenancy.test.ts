import { expect } from 'chai';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { GROUP, VERSION, resourceAddress, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { waitFor } from '../support/wait.ts';

const TENANT_ANNOTATION = 'audittrail.dev/tenant';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * Namespaces bound to tenants (docs/kubernetes.md "Tenancy"): a cluster administrator annotates a Namespace
 * with its tenant, and the controller refuses there every resource of another tenant: Stalled with a Warning
 * Event, not claimed, nothing written to the database. controller.requireTenantBinding refuses every resource
 * of an unbound namespace.
 */
describe('namespaces bound to tenants', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;

  const createNamespace = (name: string, tenant?: string) =>
    harness.core.createNamespace({
      body: { metadata: { name, ...(tenant ? { annotations: { [TENANT_ANNOTATION]: tenant } } : {}) } },
    });
  const apiKey = (namespace: string, name: string, tenantId: string, controllerClass?: string) =>
    harness.custom.createNamespacedCustomObject({
      ...resourceAddress(namespace, 'apikeys'),
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name },
        spec: { tenantId, scopes: ['audit:read'], secretName: `${name}-key`, ...(controllerClass ? { controllerClass } : {}) },
      },
    });
  const get = async (namespace: string, plural: string, name: string) =>
    (await harness.custom.getNamespacedCustomObject({ ...resourceAddress(namespace, plural), name })) as {
      metadata: { uid: string; finalizers?: string[]; annotations?: Record<string, string> };
      status?: { conditions?: Array<{ type: string; status: string; reason: string; message: string }> };
    };
  const condition = async (namespace: string, plural: string, name: string, type: string) =>
    (await get(namespace, plural, name)).status?.conditions?.find((item) => item.type === type);
  const warnings = async (namespace: string, name: string, reason: string) =>
    (await harness.core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name},reason=${reason}` })).items.filter(
      (event) => event.type === 'Warning',
    );

  before(async () => {
    harness = await startControllerHarness();
    harness.startController('tenancy-1');
    harness.startController('strict-1', { controllerClass: 'strict', leaseName: 'strict-controller', requireTenantBinding: true });
    await waitFor(() => harness.controllers.every((controller) => controller.isLeader), 'both controllers to lead');
  });

  after(async () => {
    await harness?.stop();
  });

  it("refuses another tenant's ApiKey in a bound namespace: Stalled, a Warning Event, no claim, no key; its own tenant's is minted", async () => {
    await createNamespace('acme-team', 'acme');
    await apiKey('acme-team', 'intruder', 'globex');
    await apiKey('acme-team', 'own', 'acme');
    await waitFor(async () => (await condition('acme-team', 'apikeys', 'own', 'Ready'))?.status === 'True', 'the own key Ready');
    await waitFor(async () => (await condition('acme-team', 'apikeys', 'intruder', 'Stalled'))?.status === 'True', 'the intruder Stalled');
    const stalled = (await condition('acme-team', 'apikeys', 'intruder', 'Stalled'))!;
    expect(stalled.reason).to.equal('TenantNotBoundToNamespace');
    expect(stalled.message).to.include('bound to tenant acme').and.include('acts for globex');
    expect(await warnings('acme-team', 'intruder', 'TenantNotBoundToNamespace')).to.have.length(1);
    const intruder = await get('acme-team', 'apikeys', 'intruder');
    expect(intruder.metadata.finalizers ?? []).to.deep.equal([]);
    expect(intruder.metadata.annotations ?? {}).to.not.have.property('audittrail.dev/deployment-id');
    expect(await harness.keys.findManaged(`kubernetes:acme-team/intruder/${intruder.metadata.uid}`)).to.equal(undefined);
    const { rows } = await harness.db.pool.query(`SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = 'globex'`);
    expect(rows[0].n).to.equal(0);
    const secret = await harness.core.readNamespacedSecret({ namespace: 'acme-team', name: 'intruder-key' }).then(
      () => 'found',
      (error: { code?: number }) => error.code,
    );
    expect(secret).to.equal(404);
  });

  it('refuses an AuditLogStream for every tenant, or for another, in a bound namespace', async () => {
    for (const [name, tenants] of [
      ['everyone', { allTenants: true }],
      ['others', { tenantIds: ['acme', 'globex'] }],
    ] as const) {
      await harness.custom.createNamespacedCustomObject({
        ...resourceAddress('acme-team', 'auditlogstreams'),
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'AuditLogStream',
          metadata: { name },
          spec: { ...tenants, destination: { type: 'splunk_hec', url: 'https://splunk.example.com', secretRef: { name: 'hec' } } },
        },
      });
      await waitFor(
        async () => (await condition('acme-team', 'auditlogstreams', name, 'Stalled'))?.reason === 'TenantNotBoundToNamespace',
        `${name} refused`,
      );
    }
    expect((await condition('acme-team', 'auditlogstreams', 'everyone', 'Stalled'))!.message).to.include('acts for every tenant');
    expect((await condition('acme-team', 'auditlogstreams', 'others', 'Stalled'))!.message).to.include('acts for globex');
  });

  it('decides again at once when a cluster administrator rebinds the namespace', async () => {
    await harness.core.patchNamespace(
      { name: 'acme-team', body: { metadata: { annotations: { [TENANT_ANNOTATION]: 'globex' } } } },
      mergePatch,
    );
    await waitFor(async () => (await condition('acme-team', 'apikeys', 'intruder', 'Ready'))?.status === 'True', 'the globex key Ready');
    expect(await condition('acme-team', 'apikeys', 'intruder', 'Stalled')).to.equal(undefined);
  });

  it('refuses everything in a namespace whose annotation names no valid tenant', async () => {
    await createNamespace('broken-team', 'not a tenant!');
    await apiKey('broken-team', 'k', 'acme');
    await waitFor(async () => (await condition('broken-team', 'apikeys', 'k', 'Stalled'))?.reason === 'InvalidTenantBinding', 'refused');
  });

  it('with requireTenantBinding, refuses every resource of an unbound namespace and reconciles those of a bound one', async () => {
    await createNamespace('unbound-team');
    await createNamespace('bound-team', 'initech');
    await apiKey('unbound-team', 'k', 'initech', 'strict');
    await apiKey('bound-team', 'k', 'initech', 'strict');
    await waitFor(async () => (await condition('bound-team', 'apikeys', 'k', 'Ready'))?.status === 'True', 'the bound key Ready');
    await waitFor(async () => (await condition('unbound-team', 'apikeys', 'k', 'Stalled'))?.reason === 'NamespaceNotBound', 'refused');
    expect((await condition('unbound-team', 'apikeys', 'k', 'Stalled'))!.message).to.include(
      `kubectl annotate namespace unbound-team ${TENANT_ANNOTATION}=<tenant>`,
    );
    // The default class's controller does not require a binding: an unbound namespace is open to it.
    await apiKey('unbound-team', 'open', 'initech');
    await waitFor(async () => (await condition('unbound-team', 'apikeys', 'open', 'Ready'))?.status === 'True', 'the open key Ready');
  });
});
