import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { verifyStandardWebhook, verifyWebhookSignature } from '../../src/client/index.ts';
import { SigningKeys } from '../../src/delivery/deliveryRequest.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { startReceiver, type ReceivedDelivery, type TestReceiver } from '../support/receiver.ts';
import { TEST_ENCRYPTION_KEY, call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { untilInstant, waitFor } from '../support/wait.ts';
import { insertEndpointRow } from '../support/webhookEndpoints.ts';

const box = new SecretBox(TEST_ENCRYPTION_KEY);

describe('signing keys at the edge of a rotation overlap', () => {
  const keys = new SigningKeys(box);
  const current = box.seal('a'.repeat(64));
  const previous = box.seal('b'.repeat(64));
  const expiresAt = new Date('2026-11-23T12:00:00.000Z');

  const hmacOnly = { hmac: true, ed25519: null, headers: null };

  it('signs with both secrets 1 ms before the expiry, and with the new one only from the expiry on, even with the old key cached', () => {
    const sealed = { ...hmacOnly, current, previous: { ciphertext: previous, expiresAt } };
    const before = keys.at('wh_x', sealed, expiresAt.getTime() - 1).hmac;
    expect(before).to.have.length(2);
    expect(before[0]!.export().toString()).to.equal('a'.repeat(64));
    expect(before[1]!.export().toString()).to.equal('b'.repeat(64));
    for (const later of [expiresAt.getTime(), expiresAt.getTime() + 1, expiresAt.getTime() + 86_400_000]) {
      const after = keys.at('wh_x', sealed, later).hmac;
      expect(after.map((key) => key.export().toString())).to.deep.equal(['a'.repeat(64)]);
    }
  });

  it('follows a rotation: the old current key becomes the previous one', () => {
    const first = keys.at('wh_y', { ...hmacOnly, current: previous, previous: null }, 0).hmac;
    const rotated = keys.at(
      'wh_y',
      { ...hmacOnly, current, previous: { ciphertext: previous, expiresAt } },
      expiresAt.getTime() - 1000,
    ).hmac;
    expect(rotated[1]).to.equal(first[0]);
    expect(rotated[0]!.export().toString()).to.equal('a'.repeat(64));
  });
});

describe('webhook secret rotation, test sends and Standard Webhooks', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  const receivers: TestReceiver[] = [];
  let tenantCounter = 0;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'relay', 'worker'],
      env: {
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        DELIVERY_SCHEDULE: '200ms,200ms,200ms,200ms',
        DELIVERY_RELAY_POLL_MS: '50',
      },
    });
  });

  after(async () => {
    await service?.stop();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await db?.drop();
  });

  const hooks = () => `${service.baseUrl}/audit/webhooks`;

  async function freshTenant(scopes = ['audit:read', 'webhooks:write']) {
    tenantCounter += 1;
    const tenantId = `rotation-${tenantCounter}`;
    const { key } = await mintKey(db.url, { tenantId, scopes });
    return { tenantId, key };
  }

  async function receiver(reply: Parameters<typeof startReceiver>[0] = 204): Promise<TestReceiver> {
    const started = await startReceiver(reply);
    receivers.push(started);
    return started;
  }

  /** Registers an endpoint for `phi.` events only, so that its own admin events do not reach it. */
  async function register(key: string, url: string) {
    const response = await call(hooks(), { key, body: { url, event_filter: ['phi.'] } });
    expect(response.status, response.text).to.equal(201);
    return response.json as { endpoint: { id: string }; secret: string; standard_webhooks_secret: string };
  }

  const rotate = (key: string, id: string, body?: unknown, headers?: Record<string, string>) =>
    call(`${hooks()}/${id}/rotate-secret`, { key, method: 'POST', body, headers });

  /** One phi.read event for the tenant, and its delivery as the receiver got it. */
  async function deliverOne(tenantId: string, target: TestReceiver): Promise<ReceivedDelivery> {
    const seen = target.received.length;
    const event = newEvent({ tenantId, action: 'phi.read' });
    await seedEvents(db.url, [event]);
    await waitFor(() => target.received.some((delivery) => delivery.headers['x-service-event-id'] === event.eventId), 'the delivery');
    expect(target.received.length).to.equal(seen + 1);
    return target.received.find((delivery) => delivery.headers['x-service-event-id'] === event.eventId)!;
  }

  const v1Count = (delivery: ReceivedDelivery) =>
    String(delivery.headers['x-service-signature'])
      .split(',')
      .filter((part) => part.startsWith('v1=')).length;
  const acceptsService = (secret: string, delivery: ReceivedDelivery) =>
    verifyWebhookSignature(secret, String(delivery.headers['x-service-signature']), delivery.rawBody).valid;
  const standardHeaders = (delivery: ReceivedDelivery) => ({
    'webhook-id': String(delivery.headers['webhook-id']),
    'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
    'webhook-signature': String(delivery.headers['webhook-signature']),
  });
  /** Verified by the reference Standard Webhooks library, as a receiver using it would. */
  const acceptsStandard = (whsec: string, delivery: ReceivedDelivery) => {
    try {
      new Webhook(whsec).verify(delivery.rawBody.toString('utf8'), standardHeaders(delivery));
      return true;
    } catch {
      return false;
    }
  };

  async function storedSecret(id: string): Promise<{ current: string; previous: string | null; expiresAt: Date | null }> {
    const { rows } = await db.pool.query(
      'SELECT secret_ciphertext, previous_secret_ciphertext, previous_secret_expires_at FROM webhook_endpoints WHERE id = $1',
      [id],
    );
    const row = rows[0];
    return {
      current: box.open(row.secret_ciphertext),
      previous: row.previous_secret_ciphertext ? box.open(row.previous_secret_ciphertext) : null,
      expiresAt: row.previous_secret_expires_at,
    };
  }

  async function trail(key: string, id: string): Promise<Array<{ action: string; details: string }>> {
    const events = await call(`${service.baseUrl}/audit/events?resource_type=webhook_endpoint&limit=1000`, { key });
    expect(events.status, events.text).to.equal(200);
    return events.json.events.filter((event: { resource_id: string }) => event.resource_id === id);
  }

  describe('Standard Webhooks', () => {
    it('answers a registration with the whsec_ form of the same key, and every delivery verifies with the reference library', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const registered = await register(key, target.url);
      expect(registered.standard_webhooks_secret).to.equal(`whsec_${Buffer.from(registered.secret, 'utf8').toString('base64')}`);
      const delivery = await deliverOne(tenantId, target);
      expect(delivery.headers['webhook-id']).to.equal(delivery.headers['x-service-event-id']);
      expect(delivery.headers['webhook-timestamp']).to.equal(/^t=(\d+),/.exec(String(delivery.headers['x-service-signature']))![1]);
      expect(String(delivery.headers['webhook-signature'])).to.match(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(acceptsStandard(registered.standard_webhooks_secret, delivery)).to.equal(true);
      expect(acceptsService(registered.secret, delivery)).to.equal(true);
      // The client's own verifier takes either form of the secret.
      expect(verifyStandardWebhook(registered.secret, standardHeaders(delivery), delivery.rawBody).valid).to.equal(true);
      expect(verifyStandardWebhook(registered.standard_webhooks_secret, standardHeaders(delivery), delivery.rawBody).valid).to.equal(true);
      // A wrong key, a changed body or another id fails.
      expect(acceptsStandard(`whsec_${Buffer.from('0'.repeat(64)).toString('base64')}`, delivery)).to.equal(false);
      expect(
        acceptsStandard(registered.standard_webhooks_secret, {
          ...delivery,
          rawBody: Buffer.from(delivery.rawBody.toString().replace('phi.read', 'phi.rea_')),
        }),
      ).to.equal(false);
      const otherId = { ...delivery, headers: { ...delivery.headers, 'webhook-id': '00000000-0000-7000-8000-000000000000' } };
      expect(acceptsStandard(registered.standard_webhooks_secret, otherId)).to.equal(false);
    });
  });

  describe('rotation', () => {
    it('answers 200 with the new secret (both forms) and the expiry, and signs every delivery with both secrets meanwhile', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const registered = await register(key, target.url);
      const before = Date.now();
      const response = await rotate(key, registered.endpoint.id, { overlap_s: 3600 });
      expect(response.status, response.text).to.equal(200);
      expect(response.headers.get('cache-control')).to.equal('no-store');
      const { endpoint, secret, standard_webhooks_secret: whsec, previous_secret_expires_at: expires } = response.json;
      expect(endpoint).to.include({ id: registered.endpoint.id, active: true });
      expect(endpoint).not.to.have.property('secret');
      expect(secret).to.match(/^[0-9a-f]{64}$/);
      expect(secret).not.to.equal(registered.secret);
      expect(whsec).to.equal(`whsec_${Buffer.from(secret, 'utf8').toString('base64')}`);
      expect(expires).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(Date.parse(expires)).to.be.within(before + 3_600_000, Date.now() + 3_600_000);
      expect(await storedSecret(registered.endpoint.id)).to.deep.include({ current: secret, previous: registered.secret });

      const delivery = await deliverOne(tenantId, target);
      expect(String(delivery.headers['x-service-signature'])).to.match(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
      expect(String(delivery.headers['webhook-signature'])).to.match(/^v1,\S+ v1,\S+$/);
      for (const [hex, standard] of [
        [secret, whsec],
        [registered.secret, registered.standard_webhooks_secret],
      ]) {
        expect(acceptsService(hex, delivery)).to.equal(true);
        expect(acceptsStandard(standard, delivery)).to.equal(true);
      }
      // The newest first, in both headers.
      const [newest] = String(delivery.headers['webhook-signature']).split(' ');
      expect(verifyStandardWebhook(secret, { ...standardHeaders(delivery), 'webhook-signature': newest }, delivery.rawBody).valid).to.equal(
        true,
      );

      const listed = await call(hooks(), { key });
      expect(listed.json.endpoints[0].previous_secret_expires_at).to.equal(expires);
    });

    it('writes admin.webhook.rotate_secret to the trail, never a secret', async () => {
      const { key } = await freshTenant();
      const registered = await register(key, 'http://127.0.0.1:9/hook');
      const response = await rotate(key, registered.endpoint.id, { overlap_s: 60 });
      expect(response.status).to.equal(200);
      const events = await trail(key, registered.endpoint.id);
      expect(events.map((event) => event.action)).to.deep.equal(['admin.webhook.rotate_secret', 'admin.webhook.create']);
      const details = JSON.parse(events[0]!.details);
      expect(details).to.include({
        overlap_s: 60,
        previous_secret_expires_at: response.json.previous_secret_expires_at,
        older_secret_retired: false,
      });
      const text = JSON.stringify(events);
      for (const secret of [registered.secret, response.json.secret]) {
        expect(text).not.to.include(secret);
        expect(text).not.to.include(Buffer.from(secret).toString('base64'));
      }
    });

    it('keeps the old secret valid just before the expiry and never after it (overlap of 3 s)', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const registered = await register(key, target.url);
      const response = await rotate(key, registered.endpoint.id, { overlap_s: 3 });
      expect(response.status).to.equal(200);
      const expiresAt = Date.parse(response.json.previous_secret_expires_at);

      // Well inside the overlap, and again about a second before its end: both secrets sign.
      const early = await deliverOne(tenantId, target);
      expect(v1Count(early)).to.equal(2);
      await untilInstant(expiresAt - 1_200);
      const late = await deliverOne(tenantId, target);
      expect(late.receivedAt).to.be.below(expiresAt);
      expect(v1Count(late)).to.equal(2);
      expect(acceptsService(registered.secret, late)).to.equal(true);
      expect(acceptsStandard(registered.standard_webhooks_secret, late)).to.equal(true);

      // Events written after the expiry are signed after it: with the new secret only.
      await untilInstant(expiresAt + 50);
      for (let index = 0; index < 3; index += 1) {
        const after = await deliverOne(tenantId, target);
        expect(v1Count(after)).to.equal(1);
        expect(String(after.headers['webhook-signature'])).not.to.include(' ');
        expect(acceptsService(registered.secret, after)).to.equal(false);
        expect(acceptsStandard(registered.standard_webhooks_secret, after)).to.equal(false);
        expect(acceptsService(response.json.secret, after)).to.equal(true);
        expect(acceptsStandard(response.json.standard_webhooks_secret, after)).to.equal(true);
      }
      const listed = await call(hooks(), { key });
      expect(listed.json.endpoints[0].previous_secret_expires_at).to.equal(null);
    });

    it('retires the oldest secret at once when rotated twice in a row: at most two secrets sign', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const first = await register(key, target.url);
      const second = await rotate(key, first.endpoint.id, { overlap_s: 3600 });
      const third = await rotate(key, first.endpoint.id, { overlap_s: 3600 });
      expect([second.status, third.status]).to.deep.equal([200, 200]);
      expect(await storedSecret(first.endpoint.id)).to.deep.include({ current: third.json.secret, previous: second.json.secret });

      const delivery = await deliverOne(tenantId, target);
      expect(v1Count(delivery)).to.equal(2);
      expect(acceptsService(third.json.secret, delivery)).to.equal(true);
      expect(acceptsService(second.json.secret, delivery)).to.equal(true);
      expect(acceptsService(first.secret, delivery)).to.equal(false);
      expect(acceptsStandard(first.standard_webhooks_secret, delivery)).to.equal(false);
      expect(acceptsStandard(second.json.standard_webhooks_secret, delivery)).to.equal(true);

      const events = await trail(key, first.endpoint.id);
      expect(events.map((event) => JSON.parse(event.details).older_secret_retired).slice(0, 2)).to.deep.equal([true, false]);
    });

    it('signs a delivery that waited in its lane through two rotations with the two newest secrets only', async () => {
      const { tenantId, key } = await freshTenant();
      // Every slot of the endpoint (16) held for 800 ms: long enough to rotate twice meanwhile, short of
      // the second after which the worker would park the waiting delivery (and read it again later).
      const slots = 16;
      const target = await receiver();
      target.reply(() => (target.received.length <= slots ? { status: 204, delayMs: 800 } : 204));
      const first = await register(key, target.url);
      const events = Array.from({ length: slots + 1 }, () => newEvent({ tenantId, action: 'phi.read' }));
      await seedEvents(db.url, events);
      await waitFor(() => target.received.length >= slots, 'every slot busy');
      const second = await rotate(key, first.endpoint.id, { overlap_s: 3600 });
      const third = await rotate(key, first.endpoint.id, { overlap_s: 3600 });
      expect([second.status, third.status]).to.deep.equal([200, 200]);

      await waitFor(() => target.received.length === slots + 1, 'the delivery that waited');
      const waited = target.received[slots]!;
      expect(v1Count(waited)).to.equal(2);
      expect(acceptsService(third.json.secret, waited)).to.equal(true);
      expect(acceptsService(second.json.secret, waited)).to.equal(true);
      expect(acceptsService(first.secret, waited)).to.equal(false);
      expect(acceptsStandard(first.standard_webhooks_secret, waited)).to.equal(false);
      expect(acceptsStandard(third.json.standard_webhooks_secret, waited)).to.equal(true);
    });

    it('with overlap_s 0 retires the old secret at once; without a body the overlap is one day', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const registered = await register(key, target.url);
      const immediate = await rotate(key, registered.endpoint.id, { overlap_s: 0 });
      expect(immediate.status).to.equal(200);
      expect(Date.parse(immediate.json.previous_secret_expires_at)).to.be.closeTo(Date.now(), 5_000);
      const delivery = await deliverOne(tenantId, target);
      expect(v1Count(delivery)).to.equal(1);
      expect(acceptsService(immediate.json.secret, delivery)).to.equal(true);

      const before = Date.now();
      const defaulted = await call(`${hooks()}/${registered.endpoint.id}/rotate-secret`, { key, method: 'POST' });
      expect(defaulted.status, defaulted.text).to.equal(200);
      expect(Date.parse(defaulted.json.previous_secret_expires_at)).to.be.within(before + 86_400_000, Date.now() + 86_400_000);
      const empty = await rotate(key, registered.endpoint.id, {});
      expect(empty.status).to.equal(200);
      expect(Date.parse(empty.json.previous_secret_expires_at) - Date.now()).to.be.closeTo(86_400_000, 5_000);
    });

    it('answers 422 for a bad body and changes nothing; 415 for a body that is not JSON', async () => {
      const { key } = await freshTenant();
      const registered = await register(key, 'http://127.0.0.1:9/hook');
      const stored = await storedSecret(registered.endpoint.id);
      for (const body of [
        { overlap_s: -1 },
        { overlap_s: 604_801 },
        { overlap_s: 1.5 },
        { overlap_s: '60' },
        { overlap_s: null },
        { overlap: 60 },
        { overlap_s: 60, extra: true },
        [],
        'null',
        '7',
      ]) {
        const response = await rotate(key, registered.endpoint.id, body);
        expect(response.status, `${JSON.stringify(body)}: ${response.text}`).to.equal(422);
        expect(response.json.error).to.equal('validation_failed');
        expect(response.json.details).to.be.an('array').that.is.not.empty;
      }
      const wrongType = await rotate(key, registered.endpoint.id, 'overlap_s=60', { 'content-type': 'application/x-www-form-urlencoded' });
      expect(wrongType.status).to.equal(415);
      const broken = await rotate(key, registered.endpoint.id, '{"overlap_s":', {});
      expect(broken.status).to.equal(400);
      const query = await call(`${hooks()}/${registered.endpoint.id}/rotate-secret?overlap_s=60`, { key, method: 'POST' });
      expect(query.status).to.equal(422);
      expect(await storedSecret(registered.endpoint.id)).to.deep.equal(stored);
      expect((await trail(key, registered.endpoint.id)).map((event) => event.action)).to.deep.equal(['admin.webhook.create']);
      // The limits themselves are accepted.
      expect((await rotate(key, registered.endpoint.id, { overlap_s: 604_800 })).status).to.equal(200);
    });
  });

  describe('test sends', () => {
    const test = (key: string, id: string) => call(`${hooks()}/${id}/test`, { key, method: 'POST' });

    async function counts(tenantId: string, id: string) {
      const { rows } = await db.pool.query(
        `SELECT (SELECT count(*)::int FROM events WHERE tenant_id = $1) AS events,
                (SELECT count(*)::int FROM deliveries WHERE endpoint_id = $2) AS deliveries,
                (SELECT consecutive_failures FROM webhook_endpoints WHERE id = $2) AS failures,
                (SELECT last_delivery_at FROM webhook_endpoints WHERE id = $2) AS last_delivery_at`,
        [tenantId, id],
      );
      return rows[0];
    }

    it('sends one signed webhook.test delivery and reports its success; nothing is stored', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver(200);
      const registered = await register(key, target.url);
      const before = await counts(tenantId, registered.endpoint.id);
      const response = await test(key, registered.endpoint.id);
      expect(response.status, response.text).to.equal(200);
      expect(response.json).to.include({ success: true, status_code: 200, error: null });
      expect(response.json.duration_ms).to.be.a('number').within(0, 10_000);
      expect(Number.isInteger(response.json.duration_ms)).to.equal(true);
      expect(target.received).to.have.length(1);
      const delivery = target.received[0]!;
      const envelope = delivery.json();
      expect(envelope).to.include({ type: 'webhook.test', tenant_id: tenantId, phi_involved: false, success: true, schema_version: '1' });
      expect(envelope.resource).to.deep.equal({ type: 'webhook_endpoint', id: registered.endpoint.id });
      expect(delivery.headers['webhook-id']).to.equal(envelope.id);
      expect(delivery.headers['x-service-event-id']).to.equal(envelope.id);
      expect(acceptsService(registered.secret, delivery)).to.equal(true);
      expect(acceptsStandard(registered.standard_webhooks_secret, delivery)).to.equal(true);
      // Not in the trail, no delivery row, no counters touched; the test event cannot be looked up.
      expect(await counts(tenantId, registered.endpoint.id)).to.deep.equal(before);
      expect((await call(`${service.baseUrl}/audit/events/${envelope.id}`, { key })).status).to.equal(404);
    });

    it('is signed with both secrets during an overlap', async () => {
      const { key } = await freshTenant();
      const target = await receiver();
      const registered = await register(key, target.url);
      const rotated = await rotate(key, registered.endpoint.id, { overlap_s: 600 });
      expect((await test(key, registered.endpoint.id)).json.success).to.equal(true);
      const delivery = target.received[0]!;
      expect(v1Count(delivery)).to.equal(2);
      expect(acceptsStandard(registered.standard_webhooks_secret, delivery)).to.equal(true);
      expect(acceptsStandard(rotated.json.standard_webhooks_secret, delivery)).to.equal(true);
    });

    it('reports a failure (a status, or no answer) as success: false and never counts it towards auto-disable', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver({ status: 500, body: 'broken' });
      const registered = await register(key, target.url);
      const before = await counts(tenantId, registered.endpoint.id);
      for (let index = 0; index < 12; index += 1) {
        const response = await test(key, registered.endpoint.id);
        expect(response.status).to.equal(200);
        expect(response.json).to.include({ success: false, status_code: 500, error: null });
      }
      expect(target.received).to.have.length(12);
      expect(await counts(tenantId, registered.endpoint.id)).to.deep.equal(before);
      const listed = await call(hooks(), { key });
      expect(listed.json.endpoints[0]).to.include({ active: true, consecutive_failures: 0 });

      const closed = await receiver();
      const gone = await register(key, closed.url);
      await closed.close();
      const refused = await test(key, gone.endpoint.id);
      expect(refused.status).to.equal(200);
      expect(refused.json.success).to.equal(false);
      expect(refused.json.status_code).to.equal(null);
      expect(refused.json.error).to.match(/ECONNREFUSED/);
    });

    it('answers 409 endpoint_inactive for a disabled endpoint, for a test and a rotation, and sends nothing', async () => {
      const { key } = await freshTenant();
      const target = await receiver();
      const registered = await register(key, target.url);
      expect((await call(`${hooks()}/${registered.endpoint.id}/disable`, { key, method: 'POST' })).status).to.equal(200);
      const stored = await storedSecret(registered.endpoint.id);
      for (const response of [await test(key, registered.endpoint.id), await rotate(key, registered.endpoint.id, { overlap_s: 60 })]) {
        expect(response.status).to.equal(409);
        expect(response.json.error).to.equal('endpoint_inactive');
      }
      expect(target.received).to.have.length(0);
      expect(await storedSecret(registered.endpoint.id)).to.deep.equal(stored);
    });
  });

  describe('scopes, tenants and Kubernetes ownership', () => {
    it('needs webhooks:write for both paths', async () => {
      const { tenantId, key } = await freshTenant();
      const registered = await register(key, 'http://127.0.0.1:9/hook');
      const { key: reader } = await mintKey(db.url, { tenantId, scopes: ['audit:read', 'audit:export'] });
      const stored = await storedSecret(registered.endpoint.id);
      for (const path of ['rotate-secret', 'test']) {
        const response = await call(`${hooks()}/${registered.endpoint.id}/${path}`, { key: reader, method: 'POST' });
        expect(response.status, path).to.equal(403);
        expect(response.json).to.include({ error: 'forbidden', required_scope: 'webhooks:write' });
      }
      expect(await storedSecret(registered.endpoint.id)).to.deep.equal(stored);
      expect((await call(`${hooks()}/${registered.endpoint.id}/test`, { method: 'POST' })).status).to.equal(401);
    });

    it("answers 403 for another tenant's endpoint and 404 for an unknown or malformed id, changing and sending nothing", async () => {
      const acme = await freshTenant();
      const globex = await freshTenant();
      const target = await receiver();
      const registered = await register(acme.key, target.url);
      const stored = await storedSecret(registered.endpoint.id);
      for (const path of ['rotate-secret', 'test']) {
        const foreign = await call(`${hooks()}/${registered.endpoint.id}/${path}`, { key: globex.key, method: 'POST' });
        expect(foreign.status, path).to.equal(403);
        expect(foreign.json.error).to.equal('forbidden');
        expect(foreign.text).not.to.include(registered.secret);
        for (const id of [`wh_${'0'.repeat(32)}`, 'wh_nope', 'x']) {
          const unknown = await call(`${hooks()}/${id}/${path}`, { key: acme.key, method: 'POST' });
          expect(unknown.status, `${path} ${id}`).to.equal(404);
          expect(unknown.json.error).to.equal('not_found');
        }
      }
      expect(target.received).to.have.length(0);
      expect(await storedSecret(registered.endpoint.id)).to.deep.equal(stored);
      expect((await trail(acme.key, registered.endpoint.id)).map((event) => event.action)).to.deep.equal(['admin.webhook.create']);
    });

    it('refuses to rotate an endpoint a WebhookEndpoint resource owns (409 managed_by_kubernetes) but tests it', async () => {
      const { key } = await freshTenant();
      const target = await receiver();
      const registered = await register(key, target.url);
      await db.pool.query('UPDATE webhook_endpoints SET managed_by = $2 WHERE id = $1', [registered.endpoint.id, 'kube/ns/siem']);
      const stored = await storedSecret(registered.endpoint.id);
      const rotation = await rotate(key, registered.endpoint.id, { overlap_s: 60 });
      expect(rotation.status).to.equal(409);
      expect(rotation.json.error).to.equal('managed_by_kubernetes');
      expect(await storedSecret(registered.endpoint.id)).to.deep.equal(stored);
      const tested = await call(`${hooks()}/${registered.endpoint.id}/test`, { key, method: 'POST' });
      expect(tested.status).to.equal(200);
      expect(tested.json.success).to.equal(true);
      expect(target.received).to.have.length(1);
    });
  });
});

describe('webhook test sends through the SSRF guard (private targets not allowed)', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let service: TestService;
  let target: TestReceiver;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { WEBHOOK_ALLOW_HTTP: 'true' } });
    target = await startReceiver(204);
  });

  after(async () => {
    await service?.stop();
    await target?.close();
    await db?.drop();
  });

  it('refuses to connect to a loopback target that got past registration, and reports why', async () => {
    const { key } = await mintKey(db.url, { tenantId: 'ssrf', scopes: ['webhooks:write'] });
    const { port } = new URL(target.url);
    // As if registered while WEBHOOK_ALLOW_PRIVATE_TARGETS was on.
    const rows: Array<[string, string]> = [
      [`wh_${'1'.repeat(32)}`, `http://127.0.0.1:${port}/hook`],
      [`wh_${'2'.repeat(32)}`, `http://[::ffff:7f00:1]:${port}/hook`],
      [`wh_${'3'.repeat(32)}`, `http://localhost:${port}/hook`],
    ];
    for (const [id, url] of rows) {
      await insertEndpointRow(db.pool, { id, tenantId: 'ssrf', url });
      const response = await call(`${service.baseUrl}/audit/webhooks/${id}/test`, { key, method: 'POST' });
      expect(response.status, response.text).to.equal(200);
      expect(response.json).to.include({ success: false, status_code: null });
      expect(response.json.error, url).to.match(/target refused/);
    }
    expect(target.received).to.have.length(0);
  });
});
