import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import { standardWebhooksSecretOf, verifyStandardWebhook, verifyWebhookSignature } from '../../src/client/index.ts';
import { ROTATE_ANNOTATION } from '../../src/controller/resources.ts';
import { ENABLE_ANNOTATION } from '../../src/controller/webhookEndpointResource.ts';
import { RECREATE_ANNOTATION } from '../../src/controller/webhookEndpointState.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { GROUP, VERSION, mergePatch, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { startReceiver, type ReceivedDelivery, type TestReceiver } from '../support/receiver.ts';
import { TEST_ENCRYPTION_KEY, call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { untilInstant, waitFor } from '../support/wait.ts';

const NAMESPACE = 'team-b';

/** WebhookEndpoint resources through client-node against the API stand-in, with real deliveries. */
describe('WebhookEndpoint controller', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;
  let delivery: TestService;
  let receiver: TestReceiver;

  before(async () => {
    harness = await startControllerHarness();
    delivery = await startTestService({
      databaseUrl: harness.db.url,
      roles: ['relay', 'worker'],
      env: {
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        DELIVERY_SCHEDULE: '50ms,50ms,50ms,50ms',
        DELIVERY_RELAY_POLL_MS: '20',
      },
    });
    receiver = await startReceiver(204);
    harness.startController('replica-1');
    await waitFor(() => harness.controllers[0]!.isLeader, 'the controller to lead');
  });

  after(async () => {
    await delivery?.stop();
    await receiver?.close();
    await harness?.stop();
  });

  const endpointResource = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'WebhookEndpoint',
    metadata: { name },
    spec,
  });
  const address = (name: string) => ({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'webhookendpoints', name });
  const create = (body: object) =>
    harness.custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'webhookendpoints', body });
  const get = (name: string) => harness.custom.getNamespacedCustomObject(address(name));
  const patch = (name: string, body: object) => harness.custom.patchNamespacedCustomObject({ ...address(name), body }, mergePatch);
  const signingSecret = async (name: string) => {
    const secret = await harness.core.readNamespacedSecret({ name, namespace: NAMESPACE });
    return Buffer.from(secret.data!.signingSecret!, 'base64').toString('utf8');
  };
  const condition = (object: any, type: string) => object.status?.conditions?.find((item: { type: string }) => item.type === type);
  const ready = (object: any) => condition(object, 'Ready');

  it('registers the endpoint, writes its signing secret to the owned Secret, and deliveries are signed with it', async () => {
    await create(
      endpointResource('siem', {
        tenantId: 'acme',
        url: receiver.url,
        eventFilter: ['phi.'],
        description: 'SIEM',
        secretName: 'siem-hook',
      }),
    );
    await waitFor(async () => ready(await get('siem'))?.status === 'True', 'Ready=True');
    const object = await get('siem');
    expect(object.status).to.include({ active: true, consecutiveFailures: 0 });
    expect(object.status.id).to.match(/^wh_[0-9a-f]{32}$/);
    const endpoint = await harness.registry.find(object.status.id);
    expect(endpoint).to.deep.include({
      url: receiver.url,
      eventFilter: ['phi.'],
      description: 'SIEM',
      managedBy: `kubernetes:${NAMESPACE}/siem/${object.metadata.uid}`,
    });

    const secret = await signingSecret('siem-hook');
    await seedEvents(harness.db.url, [newEvent({ tenantId: 'acme', action: 'phi.read' })]);
    await waitFor(() => receiver.received.length === 1, 'the delivery');
    const [t, v1] = String(receiver.received[0]!.headers['x-service-signature'])
      .split(',')
      .map((part) => part.split('=')[1]);
    expect(v1).to.equal(createHmac('sha256', secret).update(`t=${t}.`).update(receiver.received[0]!.rawBody).digest('hex'));
    await waitFor(async () => Boolean((await get('siem')).status.lastDeliveryAt), 'status.lastDeliveryAt');
    expect(JSON.stringify(await get('siem'))).not.to.include(secret);
  });

  it('applies url, filter and description changes in place', async () => {
    const before = await get('siem');
    await patch('siem', { spec: { url: `${receiver.url}?v=2`, eventFilter: ['phi.', 'admin.'], description: 'SIEM v2' } });
    await waitFor(async () => (await harness.registry.find(before.status.id))?.description === 'SIEM v2', 'the change in the registry');
    expect(await harness.registry.find(before.status.id)).to.deep.include({ url: `${receiver.url}?v=2`, eventFilter: ['phi.', 'admin.'] });
    expect((await get('siem')).status.id).to.equal(before.status.id);
  });

  it('applies delivery settings and a payload filter in place, a filter it refuses as InvalidSpec, and shows the Ed25519 public key in status', async () => {
    const before = await get('siem');
    const settings = {
      payloadFilter: {
        all: [
          { path: 'details.ward', in: ['3B', '4C'] },
          { path: 'resource.type', equals: 'patient_record' },
        ],
      },
      timeoutSeconds: 5,
      retryScheduleSeconds: [10, 60],
      rateLimitPerSecond: 50,
      ordered: true,
      signatureSchemes: ['hmac', 'ed25519'],
    };
    await patch('siem', { spec: settings });
    await waitFor(async () => (await harness.registry.find(before.status.id))?.ordered === true, 'the settings in the registry');
    const endpoint = (await harness.registry.find(before.status.id))!;
    expect(endpoint).to.deep.include({ timeoutS: 5, retryScheduleS: [10, 60], rateLimitPerS: 50, signatureSchemes: ['hmac', 'ed25519'] });
    expect(endpoint.payloadFilter).to.deep.equal(settings.payloadFilter);
    await waitFor(async () => typeof (await get('siem')).status.publicKey === 'string', 'status.publicKey');
    expect((await get('siem')).status.publicKey).to.equal(`whpk_${endpoint.publicKey!.toString('base64')}`);
    // Resyncs find nothing to change: the filter compares as JSON, whatever order Postgres keeps its keys in.
    const updates = async () =>
      (
        await harness.db.pool.query(`SELECT count(*)::int AS n FROM events WHERE action = 'admin.webhook.update' AND resource_id = $1`, [
          before.status.id,
        ])
      ).rows[0].n;
    const settled = await updates();
    await harness.reconciledAgain('webhookendpoints', NAMESPACE, 'siem');
    expect(await updates()).to.equal(settled);

    // A merge patch merges objects: the old filter goes first.
    await patch('siem', { spec: { payloadFilter: { all: null, path: 'actor.name', equals: 'x' } } });
    await waitFor(async () => ready(await get('siem'))?.reason === 'InvalidSpec', 'InvalidSpec');
    expect(ready(await get('siem')).message).to.include('payload_filter.path');
    expect((await harness.registry.find(before.status.id))!.payloadFilter).to.deep.equal(settings.payloadFilter);
    // Back to the defaults: every setting absent.
    await patch('siem', {
      spec: {
        payloadFilter: null,
        timeoutSeconds: null,
        retryScheduleSeconds: null,
        rateLimitPerSecond: null,
        ordered: null,
        signatureSchemes: null,
      },
    });
    await waitFor(async () => ready(await get('siem'))?.reason === 'Active', 'Active again');
    expect(await harness.registry.find(before.status.id)).to.deep.include({
      payloadFilter: null,
      timeoutS: null,
      retryScheduleS: null,
      rateLimitPerS: null,
      ordered: false,
      signatureSchemes: ['hmac'],
    });
  });

  it('keeps REST from disabling or deleting an endpoint the resource owns (409)', async () => {
    const { key } = await mintKey(harness.db.url, { tenantId: 'acme', scopes: ['webhooks:write'] });
    const id = (await get('siem')).status.id;
    const disable = await call(`${harness.api.baseUrl}/audit/webhooks/${id}/disable`, { key, method: 'POST' });
    expect(disable.status).to.equal(409);
    expect(disable.json.error).to.equal('managed_by_kubernetes');
    expect((await call(`${harness.api.baseUrl}/audit/webhooks/${id}`, { key, method: 'DELETE' })).status).to.equal(409);
    const rotation = await call(`${harness.api.baseUrl}/audit/webhooks/${id}/rotate-secret`, {
      key,
      method: 'POST',
      body: { overlap_s: 60 },
    });
    expect(rotation.status).to.equal(409);
    expect(rotation.json.error).to.equal('managed_by_kubernetes');
  });

  describe('rotation through the rotate annotation', () => {
    let target: TestReceiver;
    before(async () => {
      target = await startReceiver(204);
    });
    after(async () => {
      await target?.close();
    });

    const secretData = async (name: string) => {
      const secret = await harness.core.readNamespacedSecret({ name, namespace: NAMESPACE });
      return Object.fromEntries(
        Object.entries(secret.data!).map(([field, value]) => [field, Buffer.from(value, 'base64').toString('utf8')]),
      );
    };
    const stored = async (id: string) => {
      const { rows } = await harness.db.pool.query(
        'SELECT secret_ciphertext, previous_secret_ciphertext FROM webhook_endpoints WHERE id = $1',
        [id],
      );
      const box = new SecretBox(TEST_ENCRYPTION_KEY);
      return {
        current: box.open(rows[0].secret_ciphertext),
        previous: rows[0].previous_secret_ciphertext ? box.open(rows[0].previous_secret_ciphertext) : null,
      };
    };
    /** One phi.read event for `tenantId`, as the receiver got it. */
    const deliverOne = async (tenantId: string) => {
      const event = newEvent({ tenantId, action: 'phi.read' });
      await seedEvents(harness.db.url, [event]);
      await waitFor(() => target.received.some((delivery) => delivery.headers['x-service-event-id'] === event.eventId), 'the delivery');
      return target.received.find((delivery) => delivery.headers['x-service-event-id'] === event.eventId)!;
    };
    const verifies = (secret: string, delivery: ReceivedDelivery) =>
      verifyWebhookSignature(secret, String(delivery.headers['x-service-signature']), delivery.rawBody).valid &&
      verifyStandardWebhook(standardWebhooksSecretOf(secret), delivery.headers as Record<string, string>, delivery.rawBody).valid;

    it('rotates in place with spec.rotationOverlapSeconds: same endpoint, the new secret in the Secret, both signing until the expiry, then only the new one', async () => {
      await create(
        endpointResource('rotating', {
          tenantId: 'rot',
          url: target.url,
          eventFilter: ['phi.'],
          rotationOverlapSeconds: 3,
          secretName: 'rotating-hook',
        }),
      );
      await waitFor(async () => ready(await get('rotating'))?.status === 'True', 'Ready=True');
      const { id } = (await get('rotating')).status;
      const first = await secretData('rotating-hook');
      expect(first).to.deep.equal({
        signingSecret: first.signingSecret,
        standardWebhooksSecret: standardWebhooksSecretOf(first.signingSecret!),
        endpointId: id,
      });

      await patch('rotating', { metadata: { annotations: { [ROTATE_ANNOTATION]: 'one' } } });
      await waitFor(async () => (await get('rotating')).status.rotateRequest === 'one', 'the rotation to be handled');
      const rotated = await get('rotating');
      expect(rotated.status).to.include({ id, active: true });
      expect(ready(rotated)).to.include({ status: 'True', reason: 'Active' });
      const second = await secretData('rotating-hook');
      expect(second.endpointId).to.equal(id);
      expect(second.signingSecret)
        .to.match(/^[0-9a-f]{64}$/)
        .and.not.equal(first.signingSecret);
      expect(second.standardWebhooksSecret).to.equal(standardWebhooksSecretOf(second.signingSecret!));
      expect(second.previousSecretExpiresAt).to.equal(rotated.status.previousSecretExpiresAt);
      const expiresAt = Date.parse(second.previousSecretExpiresAt!);
      expect(expiresAt - Date.now()).to.be.within(0, 3_000);
      expect(await stored(id)).to.deep.equal({ current: second.signingSecret, previous: first.signingSecret });

      const during = await deliverOne('rot');
      expect(during.receivedAt).to.be.below(expiresAt);
      expect(verifies(first.signingSecret!, during)).to.equal(true);
      expect(verifies(second.signingSecret!, during)).to.equal(true);
      await untilInstant(expiresAt + 50);
      const after = await deliverOne('rot');
      expect(verifies(second.signingSecret!, after)).to.equal(true);
      expect(verifies(first.signingSecret!, after)).to.equal(false);

      // The trail shows a rotation, not a new endpoint; the resync clears the expired overlap from status.
      const trail = await harness.db.pool.query(`SELECT action FROM events WHERE resource_id = $1 ORDER BY occurred_at`, [id]);
      expect(trail.rows.map((row) => row.action)).to.deep.equal(['admin.webhook.create', 'admin.webhook.rotate_secret']);
      await harness.reconciledAgain('webhookendpoints', NAMESPACE, 'rotating');
      await waitFor(
        async () => (await get('rotating')).status.previousSecretExpiresAt === undefined,
        'the expired overlap to leave status',
      );
    });

    it('defaults the overlap to one day, and after a rotation that changed the registry but never reached the Secret keeps the secret receivers have', async () => {
      await create(endpointResource('resumed', { tenantId: 'rot-2', url: target.url, eventFilter: ['phi.'], secretName: 'resumed-hook' }));
      await waitFor(async () => ready(await get('resumed'))?.status === 'True', 'Ready=True');
      const object = await get('resumed');
      const { id } = object.status;
      const held = (await secretData('resumed-hook')).signingSecret!;
      // The first attempt of a rotation, cut off after the registry changed: its secret reached no one.
      const managedBy = `kubernetes:${NAMESPACE}/resumed/${object.metadata.uid}`;
      const lost = await harness.registry.rotateSecret(
        'rot-2',
        id,
        { overlap_s: 86_400 },
        { userId: 'test', userRole: 'controller' },
        { managedBy },
      );
      expect(await stored(id)).to.deep.equal({ current: lost.secret, previous: held });

      await patch('resumed', { metadata: { annotations: { [ROTATE_ANNOTATION]: 'after-crash' } } });
      await waitFor(async () => (await get('resumed')).status.rotateRequest === 'after-crash', 'the rotation to be handled');
      const now = (await secretData('resumed-hook')).signingSecret!;
      expect(now).not.to.equal(lost.secret);
      expect(await stored(id)).to.deep.equal({ current: now, previous: held });
      const expiresAt = Date.parse((await get('resumed')).status.previousSecretExpiresAt);
      expect(expiresAt - Date.now()).to.be.closeTo(86_400_000, 10_000);
      const delivery = await deliverOne('rot-2');
      expect(verifies(held, delivery)).to.equal(true);
      expect(verifies(now, delivery)).to.equal(true);
      expect(verifies(lost.secret, delivery)).to.equal(false);
    });

    it('refuses an overlap outside 0..604800 by the CRD schema', async () => {
      for (const overlap of [-1, 604_801, 1.5]) {
        const refused = await create(
          endpointResource(`overlap-${String(overlap).replace(/\W/g, '')}`, {
            tenantId: 'rot',
            url: target.url,
            rotationOverlapSeconds: overlap,
            secretName: 'overlap-hook',
          }),
        ).then(
          () => undefined,
          (error: { code: number; body: string }) => error,
        );
        expect(refused?.code, String(overlap)).to.equal(422);
        expect(String(refused?.body)).to.include('rotationOverlapSeconds');
      }
    });
  });

  it('refuses invalid specs by the CRD schema', async () => {
    const refused = await create(
      endpointResource('bad', { tenantId: 'acme', url: 'ftp://x/y', eventFilter: ['PHI*'], secretName: 'bad-hook' }),
    ).then(
      () => undefined,
      (error: { code: number; body: string }) => error,
    );
    expect(refused?.code).to.equal(422);
    expect(String(refused?.body)).to.match(/spec\.url|spec\.eventFilter/);
  });

  it('reports a spec the registry refuses as Ready=False/InvalidSpec with the reason, and registers nothing', async () => {
    // The CRD admits the URL; the public API's rules refuse a fragment, and the controller applies those rules.
    await create(
      endpointResource('fragment', { tenantId: 'acme', url: 'https://siem.example.com/hook#part', secretName: 'fragment-hook' }),
    );
    await waitFor(async () => ready(await get('fragment'))?.reason === 'InvalidSpec', 'Ready=False/InvalidSpec');
    const object = await get('fragment');
    expect(ready(object)).to.include({ status: 'False' });
    // kstatus: Stalled, so Flux fails the health check at once instead of waiting for its timeout.
    expect(condition(object, 'Stalled')).to.include({ status: 'True', reason: 'InvalidSpec' });
    expect(ready(object).message).to.include('must not contain a fragment');
    expect(object.status.id).to.equal(undefined);
    const events = await harness.core.listNamespacedEvent({ namespace: NAMESPACE });
    expect(events.items.some((event) => event.reason === 'InvalidSpec' && event.involvedObject.name === 'fragment')).to.equal(true);
  });

  it('shows auto-disable (drift: done by the delivery worker) at the next resync as Stalled/AutoDisabled, and re-creates the endpoint only when the annotation changes', async () => {
    const failing = await startReceiver(500);
    try {
      await create(endpointResource('flaky', { tenantId: 'globex', url: failing.url, eventFilter: ['phi.'], secretName: 'flaky-hook' }));
      await waitFor(async () => ready(await get('flaky'))?.status === 'True', 'Ready=True');
      const first = await get('flaky');
      await seedEvents(
        harness.db.url,
        Array.from({ length: 10 }, () => newEvent({ tenantId: 'globex', action: 'phi.read' })),
      );
      await waitFor(async () => ready(await get('flaky'))?.reason === 'AutoDisabled', 'AutoDisabled', 20_000);
      const disabled = await get('flaky');
      expect(disabled.status).to.include({ id: first.status.id, active: false, consecutiveFailures: 10 });
      expect(disabled.status.lastDeliveryAt).to.be.a('string');
      expect(ready(disabled)).to.include({ status: 'False', reason: 'AutoDisabled' });
      expect(condition(disabled, 'Stalled')).to.include({ status: 'True', reason: 'AutoDisabled' });
      expect(ready(disabled).message).to.include(RECREATE_ANNOTATION);
      const oldSecret = await signingSecret('flaky-hook');

      // Resyncs alone never re-create it.
      await harness.reconciledAgain('webhookendpoints', NAMESPACE, 'flaky');
      expect((await get('flaky')).status.id).to.equal(first.status.id);

      await patch('flaky', { metadata: { annotations: { [RECREATE_ANNOTATION]: '1' } } });
      await waitFor(async () => (await get('flaky')).status.active === true, 'a new active endpoint');
      const recreated = await get('flaky');
      expect(recreated.status.id).not.to.equal(first.status.id);
      // The new endpoint has had no delivery: the old one's lastDeliveryAt is gone from status, not merged in.
      expect(recreated.status).not.to.have.property('lastDeliveryAt');
      expect(recreated.status.conditions.map((item: { type: string }) => item.type)).to.deep.equal(['Ready']);
      expect(await signingSecret('flaky-hook')).not.to.equal(oldSecret);
      expect((await harness.registry.find(first.status.id))?.active).to.equal(false);
    } finally {
      await failing.close();
    }
  });

  it('enables an auto-disabled endpoint again, same id and secret, when the enable annotation changes', async () => {
    const failing = await startReceiver(500);
    try {
      await create(endpointResource('shaky', { tenantId: 'initech', url: failing.url, secretName: 'shaky-hook' }));
      await waitFor(async () => ready(await get('shaky'))?.status === 'True', 'Ready=True');
      const { id } = (await get('shaky')).status;
      const secret = await signingSecret('shaky-hook');
      await seedEvents(
        harness.db.url,
        Array.from({ length: 10 }, () => newEvent({ tenantId: 'initech', action: 'phi.read' })),
      );
      await waitFor(async () => ready(await get('shaky'))?.reason === 'AutoDisabled', 'AutoDisabled', 20_000);
      expect(ready(await get('shaky')).message).to.include(ENABLE_ANNOTATION);
      await patch('shaky', { metadata: { annotations: { [ENABLE_ANNOTATION]: 'after-the-fix' } } });
      await waitFor(async () => (await get('shaky')).status.active === true, 'active again');
      const enabled = await get('shaky');
      expect(enabled.status).to.include({ id, consecutiveFailures: 0, enableRequest: 'after-the-fix' });
      expect(await signingSecret('shaky-hook')).to.equal(secret);
      // Handled once: a resync changes nothing.
      await harness.reconciledAgain('webhookendpoints', NAMESPACE, 'shaky');
      expect((await get('shaky')).status.id).to.equal(id);
    } finally {
      await failing.close();
    }
  });

  it('disables the endpoint on disabled: true (deliveries stop, history stays): a settled state, Ready=True with reason Disabled', async () => {
    await create(endpointResource('paused', { tenantId: 'acme', url: receiver.url, secretName: 'paused-hook' }));
    await waitFor(async () => ready(await get('paused'))?.status === 'True', 'Ready=True');
    const { id } = (await get('paused')).status;
    await patch('paused', { spec: { disabled: true } });
    await waitFor(async () => ready(await get('paused'))?.reason === 'Disabled', 'Ready/Disabled');
    const paused = await get('paused');
    expect(ready(paused)).to.include({ status: 'True' });
    expect(condition(paused, 'Stalled')).to.equal(undefined);
    expect(paused.status).to.include({ id, active: false });
    expect(await harness.registry.find(id)).to.deep.include({ active: false, disabledReason: 'manual' });
  });

  it('enables the same endpoint again when disabled: true goes (same id, its count at 0)', async () => {
    const { id } = (await get('paused')).status;
    await patch('paused', { spec: { disabled: false } });
    await waitFor(async () => (await get('paused')).status.active === true, 'active again');
    expect((await get('paused')).status.id).to.equal(id);
    expect(ready(await get('paused'))).to.include({ status: 'True', reason: 'Active' });
    expect(await harness.registry.find(id)).to.deep.include({ active: true, disabledReason: null, consecutiveFailures: 0 });
    const events = await harness.core.listNamespacedEvent({ namespace: NAMESPACE });
    expect(events.items.some((event) => event.reason === 'EndpointEnabled' && event.involvedObject.name === 'paused')).to.equal(true);
  });

  it('deletes the endpoint and its history when the resource is deleted; the Secret goes with it', async () => {
    const id = (await get('flaky')).status.id;
    await harness.custom.deleteNamespacedCustomObject(address('flaky'));
    await waitFor(
      async () =>
        (await get('flaky').then(
          () => 'present',
          () => 'gone',
        )) === 'gone',
      'the resource to go',
    );
    const rows = await harness.db.pool.query(`SELECT count(*)::int AS n FROM webhook_endpoints WHERE managed_by LIKE '%/flaky/%'`);
    expect(rows.rows[0].n).to.equal(0);
    expect(await harness.registry.find(id)).to.equal(undefined);
    const secret = await harness.core.readNamespacedSecret({ name: 'flaky-hook', namespace: NAMESPACE }).then(
      () => 'present',
      (error: { code: number }) => error.code,
    );
    expect(secret).to.equal(404);
  });
});
