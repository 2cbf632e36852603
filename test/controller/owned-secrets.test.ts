import { expect } from 'chai';
import { GROUP, VERSION, mergePatch, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/** The annotation as users write it (docs/kubernetes.md). */
const ROTATE_ANNOTATION = 'audittrail.dev/rotate';

const NAMESPACE = 'team-s';

type Plural = 'apikeys' | 'webhookendpoints';

/** Shared by both blocks: the resources of both kinds, and what the trail and the registry hold for them. */
function helpers(harness: () => ControllerHarness) {
  const address = (plural: Plural, name: string) => ({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural, name });
  const kinds = { apikeys: 'ApiKey', webhookendpoints: 'WebhookEndpoint' } as const;
  return {
    create: (plural: Plural, name: string, spec: Record<string, unknown>) =>
      harness().custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NAMESPACE,
        plural,
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: kinds[plural], metadata: { name }, spec },
      }),
    get: (plural: Plural, name: string) => harness().custom.getNamespacedCustomObject(address(plural, name)),
    annotate: (plural: Plural, name: string, annotations: Record<string, string>) =>
      harness().custom.patchNamespacedCustomObject({ ...address(plural, name), body: { metadata: { annotations } } }, mergePatch),
    /** A change that asks the controller for nothing: a label. */
    label: (plural: Plural, name: string, labels: Record<string, string>) =>
      harness().custom.patchNamespacedCustomObject({ ...address(plural, name), body: { metadata: { labels } } }, mergePatch),
    condition: (object: any, type: string) => object.status?.conditions?.find((item: { type: string }) => item.type === type),
    secretValue: async (name: string, key: string) => {
      const secret = await harness().core.readNamespacedSecret({ name, namespace: NAMESPACE });
      return Buffer.from(secret.data![key]!, 'base64').toString('utf8');
    },
    /** Rows the controller wrote to the database for a resource, and its entries in the tenant's append-only trail. */
    written: async (name: string) => {
      const { pool } = harness().db;
      const managed = `kubernetes:${NAMESPACE}/${name}/%`;
      const keys = await pool.query(`SELECT count(*)::int AS n FROM api_keys WHERE managed_by LIKE $1`, [managed]);
      const endpoints = await pool.query(`SELECT count(*)::int AS n FROM webhook_endpoints WHERE managed_by LIKE $1`, [managed]);
      const trail = await pool.query(`SELECT action FROM events WHERE user_id = $1 ORDER BY occurred_at`, [
        `kubernetes:${NAMESPACE}/${name}`,
      ]);
      return {
        keys: keys.rows[0].n as number,
        endpoints: endpoints.rows[0].n as number,
        trail: trail.rows.map((row) => row.action as string),
      };
    },
    warnings: async (name: string, reason: string) =>
      (
        await harness().core.listNamespacedEvent({
          namespace: NAMESPACE,
          fieldSelector: `involvedObject.name=${name},reason=${reason},type=Warning`,
        })
      ).items,
  };
}

describe('a Secret name taken by someone else', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;
  let receiver: TestReceiver;
  const { create, get, condition, written, warnings, secretValue } = helpers(() => harness);

  before(async () => {
    harness = await startControllerHarness();
    receiver = await startReceiver(204);
    harness.startController('replica-1');
    await waitFor(() => harness.controllers[0]!.isLeader, 'the controller to lead');
  });

  after(async () => {
    await receiver?.close();
    await harness?.stop();
  });

  const foreignSecret = (name: string) =>
    harness.core.createNamespacedSecret({
      namespace: NAMESPACE,
      body: { metadata: { name, labels: { app: 'someone-else' } }, type: 'Opaque', stringData: { password: 'theirs' } },
    });

  for (const [plural, spec, works] of [
    [
      'apikeys',
      { tenantId: 'acme', scopes: ['audit:read'] },
      async (name: string) =>
        (await call(`${harness.api.baseUrl}/audit/events?limit=1`, { key: await secretValue(`${name}-secret`, 'apiKey') })).status === 200,
    ],
    [
      'webhookendpoints',
      { tenantId: 'acme', url: '' },
      async (name: string) => (await harness.registry.find(await secretValue(`${name}-secret`, 'endpointId')))?.active === true,
    ],
  ] as const) {
    it(`${plural}: writes nothing — not to the Secret, the database or the trail — reports Stalled/SecretConflict, and recovers by itself once the Secret is gone`, async () => {
      const name = `taken-${plural === 'apikeys' ? 'key' : 'hook'}`;
      const theirs = await foreignSecret(`${name}-secret`);
      await create(plural, name, {
        ...spec,
        ...(plural === 'webhookendpoints' ? { url: receiver.url } : {}),
        secretName: `${name}-secret`,
      });
      await waitFor(async () => condition(await get(plural, name), 'Ready')?.reason === 'SecretConflict', 'Ready=False/SecretConflict');
      const object = await get(plural, name);
      expect(condition(object, 'Ready')).to.include({ status: 'False' });
      expect(condition(object, 'Stalled')).to.include({ status: 'True', reason: 'SecretConflict' });
      await harness.reconciledAgain(plural, NAMESPACE, name); // resyncs: they must change nothing either

      expect(await written(name)).to.deep.equal({ keys: 0, endpoints: 0, trail: [] });
      const untouched = await harness.core.readNamespacedSecret({ name: `${name}-secret`, namespace: NAMESPACE });
      expect(untouched.metadata!.resourceVersion).to.equal(theirs.metadata!.resourceVersion);
      expect(untouched.metadata!.ownerReferences).to.equal(undefined);
      const [warning] = await warnings(name, 'SecretConflict');
      expect(warning!.message).to.include(`Secret ${name}-secret exists and is not owned by this`);

      await harness.core.deleteNamespacedSecret({ name: `${name}-secret`, namespace: NAMESPACE });
      await waitFor(async () => condition(await get(plural, name), 'Ready')?.status === 'True', 'Ready=True once the Secret is gone');
      expect(await works(name)).to.equal(true);
      const recovered = await written(name);
      expect(recovered.trail).to.deep.equal([plural === 'apikeys' ? 'admin.key.create' : 'admin.webhook.create']);
      expect(condition(await get(plural, name), 'Stalled')).to.equal(undefined);
    });
  }
});

describe('a deleted Secret, and rotation on request', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;
  let receiver: TestReceiver;
  const { create, get, annotate, label, condition, written, warnings, secretValue } = helpers(() => harness);

  before(async () => {
    harness = await startControllerHarness();
    receiver = await startReceiver(204);
    // No resync within the tests: what the controller sees, it sees through its watches.
    harness.startController('replica-1', { resyncMs: 60_000 });
    await waitFor(() => harness.controllers[0]!.isLeader, 'the controller to lead');
  });

  after(async () => {
    await receiver?.close();
    await harness?.stop();
  });

  const deleteSecret = (name: string) => harness.core.deleteNamespacedSecret({ name, namespace: NAMESPACE });
  const keyWorks = async (key: string) => (await call(`${harness.api.baseUrl}/audit/events?limit=1`, { key })).status === 200;

  it('ApiKey: reported within seconds as Stalled/SecretMissing with a Warning Event; the key keeps working and nothing is minted', async () => {
    await create('apikeys', 'lost', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'lost-key' });
    await waitFor(async () => (await get('apikeys', 'lost')).status?.state === 'Active', 'Active');
    const key = await secretValue('lost-key', 'apiKey');
    const { lookupId } = (await get('apikeys', 'lost')).status;

    await deleteSecret('lost-key');
    await waitFor(
      async () => condition(await get('apikeys', 'lost'), 'Ready')?.reason === 'SecretMissing',
      'Ready=False/SecretMissing',
      5_000,
    );
    const object = await get('apikeys', 'lost');
    expect(condition(object, 'Stalled')).to.include({ status: 'True', reason: 'SecretMissing' });
    expect(condition(object, 'Ready').message).to.include(ROTATE_ANNOTATION);
    expect(object.status).to.include({ lookupId, state: 'Active' });
    expect(await warnings('lost', 'SecretMissing')).to.have.length(1);
    expect(await keyWorks(key)).to.equal(true);
    expect(await written('lost')).to.deep.equal({ keys: 1, endpoints: 0, trail: ['admin.key.create'] });
  });

  it('ApiKey: rotates once per new value of the rotate annotation: a new key in a new Secret, the old one revoked', async () => {
    const oldKey = (await harness.keys.list('acme')).find((record) => record.managedBy?.includes('/lost/'))!;
    await annotate('apikeys', 'lost', { [ROTATE_ANNOTATION]: 'first' });
    await waitFor(async () => (await get('apikeys', 'lost')).status?.rotateRequest === 'first', 'the rotation to be handled');
    const rotated = await get('apikeys', 'lost');
    expect(rotated.status.lookupId).not.to.equal(oldKey.lookupId);
    expect(condition(rotated, 'Ready')).to.include({ status: 'True', reason: 'Active' });
    const newKey = await secretValue('lost-key', 'apiKey');
    expect(newKey).to.include(rotated.status.lookupId);
    expect(await keyWorks(newKey)).to.equal(true);
    expect((await harness.keys.find(oldKey.lookupId)).revokedAt).to.be.an.instanceOf(Date);

    // The same value asks for nothing more, whatever else changes (each change is reconciled, with no resync).
    const reconciled = harness.reconciledAgain('apikeys', NAMESPACE, 'lost', 1);
    await label('apikeys', 'lost', { touched: 'yes' });
    await annotate('apikeys', 'lost', { [ROTATE_ANNOTATION]: 'first', unrelated: 'x' });
    await reconciled;
    expect((await get('apikeys', 'lost')).status.lookupId).to.equal(rotated.status.lookupId);
    expect((await written('lost')).keys).to.equal(2);

    await annotate('apikeys', 'lost', { [ROTATE_ANNOTATION]: 'second' });
    await waitFor(async () => (await get('apikeys', 'lost')).status?.rotateRequest === 'second', 'the second rotation');
    expect((await written('lost')).keys).to.equal(3);
    expect(await keyWorks(newKey)).to.equal(false);
  });

  it('ApiKey: an annotation already present when the resource is created mints one key, not two', async () => {
    await harness.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NAMESPACE,
      plural: 'apikeys',
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name: 'preset', annotations: { [ROTATE_ANNOTATION]: 'from-git' } },
        spec: { tenantId: 'acme', scopes: ['audit:read'], secretName: 'preset-key' },
      },
    });
    await waitFor(async () => (await get('apikeys', 'preset')).status?.state === 'Active', 'Active');
    // One more reconcile of the same annotation (a label change causes it; there is no resync here).
    const reconciled = harness.reconciledAgain('apikeys', NAMESPACE, 'preset', 1);
    await label('apikeys', 'preset', { touched: 'yes' });
    await reconciled;
    expect((await get('apikeys', 'preset')).status.rotateRequest).to.equal('from-git');
    expect((await written('preset')).keys).to.equal(1);
  });

  it('WebhookEndpoint: a deleted Secret is reported as Stalled/SecretMissing; the endpoint keeps its id and stays active; rotation writes a new secret for the same endpoint', async () => {
    await create('webhookendpoints', 'lost-hook', { tenantId: 'acme', url: receiver.url, secretName: 'lost-hook-secret' });
    await waitFor(async () => condition(await get('webhookendpoints', 'lost-hook'), 'Ready')?.status === 'True', 'Ready=True');
    const { id } = (await get('webhookendpoints', 'lost-hook')).status;
    const oldSecret = await secretValue('lost-hook-secret', 'signingSecret');

    await deleteSecret('lost-hook-secret');
    await waitFor(
      async () => condition(await get('webhookendpoints', 'lost-hook'), 'Ready')?.reason === 'SecretMissing',
      'Ready=False/SecretMissing',
      5_000,
    );
    expect(condition(await get('webhookendpoints', 'lost-hook'), 'Stalled')).to.include({ status: 'True' });
    expect(await warnings('lost-hook', 'SecretMissing')).to.have.length(1);
    expect((await harness.registry.find(id))?.active).to.equal(true);
    expect(await written('lost-hook')).to.deep.include({ endpoints: 1, trail: ['admin.webhook.create'] });

    await annotate('webhookendpoints', 'lost-hook', { [ROTATE_ANNOTATION]: '1' });
    await waitFor(async () => (await get('webhookendpoints', 'lost-hook')).status?.rotateRequest === '1', 'the rotation to be handled');
    const rotated = await get('webhookendpoints', 'lost-hook');
    // Rotated in place (docs/kubernetes.md): same endpoint and history; the secret receivers had still
    // signs until status.previousSecretExpiresAt.
    expect(rotated.status.id).to.equal(id);
    expect(rotated.status.active).to.equal(true);
    expect(await secretValue('lost-hook-secret', 'endpointId')).to.equal(id);
    expect(await secretValue('lost-hook-secret', 'signingSecret')).not.to.equal(oldSecret);
    expect(await secretValue('lost-hook-secret', 'previousSecretExpiresAt')).to.equal(rotated.status.previousSecretExpiresAt);
    expect(condition(rotated, 'Ready')).to.include({ status: 'True', reason: 'Active' });
    expect(await written('lost-hook')).to.deep.include({ endpoints: 1, trail: ['admin.webhook.create', 'admin.webhook.rotate_secret'] });
  });
});
