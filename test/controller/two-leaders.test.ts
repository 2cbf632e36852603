import { expect } from 'chai';
import {
  GROUP,
  VERSION,
  mergePatch,
  resourceAddress,
  startControllerHarness,
  type ControllerHarness,
} from '../support/controller-harness.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { waitFor } from '../support/wait.ts';

const NAMESPACE = 'team-two';
const KEYS = Array.from({ length: 20 }, (_, index) => `key-${index}`);
const HOOKS = Array.from({ length: 5 }, (_, index) => `hook-${index}`);

/**
 * Two controllers of one release leading at once, each in its own process (its own connections) on the one
 * database: as during the upgrade that renamed the Lease (the old replica leads on the old name, the new one
 * on the new), or while a deposed leader has not yet noticed. The issue saw 30 keys minted for 20 ApiKeys, 6
 * of them live and in no Secret, and a resource Stalled/RevokedOutsideKubernetes. Each resource's reconciles
 * now hold its lock in the database, so whichever leader comes second finds the work done.
 */
describe('two leaders at once on one database', function () {
  this.timeout(180_000);
  let harness: ControllerHarness;
  let receiver: TestReceiver;

  before(async () => {
    harness = await startControllerHarness();
    receiver = await startReceiver(204);
    const second = await harness.connectAgain();
    harness.startController('before-upgrade', { leaseName: 'audit-trail-controller', token: 'old' });
    harness.startController('after-upgrade', { deployment: second, leaseName: 'rel-audit-trail-controller', token: 'new' });
    await waitFor(() => harness.controllers.every((controller) => controller.isLeader), 'both controllers to lead');
  });

  after(async () => {
    await receiver?.close();
    await harness?.stop();
  });

  const address = (plural: string, name?: string) => resourceAddress(NAMESPACE, plural, name);
  const get = (plural: string, name: string) => harness.custom.getNamespacedCustomObject(address(plural, name) as never);
  const ready = (object: any) => object.status?.conditions?.find((condition: { type: string }) => condition.type === 'Ready');
  const keysOf = async (name: string) =>
    (
      await harness.db.pool.query<{ lookup_id: string; revoked_at: Date | null }>(
        `SELECT lookup_id, revoked_at FROM api_keys WHERE managed_by LIKE $1 ORDER BY created_at`,
        [`kubernetes:${NAMESPACE}/${name}/%`],
      )
    ).rows;
  const secretKey = async (name: string) => {
    const secret = await harness.core.readNamespacedSecret({ name: `${name}-secret`, namespace: NAMESPACE });
    return {
      key: Buffer.from(secret.data!.apiKey!, 'base64').toString(),
      lookupId: Buffer.from(secret.data!.lookupId!, 'base64').toString(),
    };
  };
  const works = async (key: string) =>
    (await fetch(`${harness.api.baseUrl}/audit/events?limit=1`, { headers: { authorization: `Bearer ${key}` } })).status;
  /** Both leaders have been through every resource at least `times` more times. */
  const settled = (times: number) =>
    Promise.all([
      ...KEYS.map((name) => harness.reconciledAgain('apikeys', NAMESPACE, name, times)),
      ...HOOKS.map((name) => harness.reconciledAgain('webhookendpoints', NAMESPACE, name, times)),
    ]);

  it('mints one key per ApiKey and registers one endpoint per WebhookEndpoint, every one in its Secret', async () => {
    await Promise.all([
      ...KEYS.map((name) =>
        harness.custom.createNamespacedCustomObject({
          ...address('apikeys'),
          body: {
            apiVersion: `${GROUP}/${VERSION}`,
            kind: 'ApiKey',
            metadata: { name },
            spec: { tenantId: 'acme', scopes: ['audit:read'], secretName: `${name}-secret` },
          },
        }),
      ),
      ...HOOKS.map((name) =>
        harness.custom.createNamespacedCustomObject({
          ...address('webhookendpoints'),
          body: {
            apiVersion: `${GROUP}/${VERSION}`,
            kind: 'WebhookEndpoint',
            metadata: { name },
            spec: { tenantId: 'acme', url: receiver.url, secretName: `${name}-secret` },
          },
        }),
      ),
    ]);
    await waitFor(
      async () => (await Promise.all(KEYS.map((name) => get('apikeys', name)))).every((key) => key.status?.state === 'Active'),
      'every key Active',
      60_000,
    );
    await settled(4);

    for (const name of KEYS) {
      const keys = await keysOf(name);
      expect(keys, name).to.have.length(1);
      expect(keys[0]!.revoked_at, name).to.equal(null);
      const object = await get('apikeys', name);
      expect(ready(object), name).to.include({ status: 'True', reason: 'Active' });
      const { key, lookupId } = await secretKey(name);
      expect(lookupId, name).to.equal(keys[0]!.lookup_id);
      expect(object.status.lookupId, name).to.equal(lookupId);
      expect(await works(key), name).to.equal(200);
    }
    for (const name of HOOKS) {
      const endpoints = await harness.db.pool.query(`SELECT id FROM webhook_endpoints WHERE managed_by LIKE $1`, [
        `kubernetes:${NAMESPACE}/${name}/%`,
      ]);
      expect(endpoints.rows, name).to.have.length(1);
      expect(ready(await get('webhookendpoints', name)), name).to.include({ status: 'True', reason: 'Active' });
    }
  });

  it('rotates every key exactly once when asked, though both leaders see the request', async () => {
    await Promise.all(
      KEYS.map((name) =>
        harness.custom.patchNamespacedCustomObject(
          { ...address('apikeys', name), body: { metadata: { annotations: { 'audittrail.dev/rotate': 'once' } } } } as never,
          mergePatch,
        ),
      ),
    );
    await waitFor(
      async () => (await Promise.all(KEYS.map((name) => get('apikeys', name)))).every((key) => key.status?.rotateRequest === 'once'),
      'every rotation recorded',
      60_000,
    );
    await settled(4);

    for (const name of KEYS) {
      const keys = await keysOf(name);
      expect(
        keys.map((key) => key.revoked_at === null),
        name,
      ).to.deep.equal([false, true]);
      const { key, lookupId } = await secretKey(name);
      expect(lookupId, name).to.equal(keys[1]!.lookup_id);
      expect(ready(await get('apikeys', name)), name).to.include({ status: 'True', reason: 'Active' });
      expect(await works(key), name).to.equal(200);
    }
  });
});
