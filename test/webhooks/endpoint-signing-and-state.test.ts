import { expect } from 'chai';
import { verify } from 'node:crypto';
import { verifyStandardWebhook, verifyWebhookSignature } from '../../src/client/index.ts';
import { ed25519PublicKey } from '../../src/client/webhookEd25519.ts';
import type { TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import type { ReceivedDelivery, Reply, TestReceiver } from '../support/receiver.ts';
import { call, mintKey, type TestService } from '../support/service.ts';
import { untilInstant, waitFor } from '../support/wait.ts';
import { startWebhookTestBed, type WebhookTestBed } from '../support/webhookTestBed.ts';

/** Ed25519 signatures, enabling a disabled endpoint again, and ordered delivery (docs/webhooks.md). */
describe('webhook signatures, re-enabling and ordering', function () {
  this.timeout(60_000);
  let bed: WebhookTestBed;
  let db: TestDatabase;
  let service: TestService;

  before(async () => {
    bed = await startWebhookTestBed('signing', ['api', 'relay', 'worker'], { DELIVERY_SCHEDULE: '100ms,100ms,100ms,100ms' });
    ({ db, service } = bed);
  });

  after(async () => {
    await bed?.stop();
  });

  const freshTenant = () => bed.freshTenant();
  const receiver = (reply?: Reply) => bed.receiver(reply);
  const hooks = () => bed.hooks();

  async function register(key: string, body: Record<string, unknown>) {
    const response = await call(hooks(), { key, body: { event_filter: ['phi.'], ...body } });
    expect(response.status, response.text).to.equal(201);
    return { id: response.json.endpoint.id as string, secret: response.json.secret as string, endpoint: response.json.endpoint };
  }

  /** One event written now for the tenant, as the receiver got it. */
  async function deliverOne(tenantId: string, target: TestReceiver): Promise<ReceivedDelivery> {
    const event = newEvent({ tenantId, action: 'phi.read' });
    await seedEvents(db.url, [event]);
    await waitFor(() => target.received.some((delivery) => delivery.headers['x-service-event-id'] === event.eventId), 'the delivery');
    return target.received.find((delivery) => delivery.headers['x-service-event-id'] === event.eventId)!;
  }

  const signaturesOf = (delivery: ReceivedDelivery, scheme: string) =>
    String(delivery.headers['webhook-signature'])
      .split(' ')
      .filter((entry) => entry.startsWith(`${scheme},`))
      .map((entry) => Buffer.from(entry.slice(scheme.length + 1), 'base64'));

  /** Ed25519 verification with node:crypto alone, over the bytes the Standard Webhooks specification signs. */
  const ed25519Verifies = (publicKey: string, delivery: ReceivedDelivery) =>
    signaturesOf(delivery, 'v1a').some((signature) =>
      verify(
        null,
        Buffer.concat([Buffer.from(`${delivery.headers['webhook-id']}.${delivery.headers['webhook-timestamp']}.`), delivery.rawBody]),
        ed25519PublicKey(publicKey),
        signature,
      ),
    );

  describe('Ed25519 (v1a) signatures', () => {
    it('signs with Ed25519 alone: no HMAC signature, a v1a signature the served public key verifies', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const { id, endpoint } = await register(key, { url: target.url, signature_schemes: ['ed25519'] });
      expect(endpoint.signature_schemes).to.deep.equal(['ed25519']);
      expect(endpoint.public_key).to.match(/^whpk_[A-Za-z0-9+/]{43}=$/);
      const served = await call(`${hooks()}/${id}/public-keys`, { key });
      expect(served.status).to.equal(200);
      expect(served.json).to.deep.equal({ public_keys: [{ public_key: endpoint.public_key, expires_at: null }] });

      const delivery = await deliverOne(tenantId, target);
      expect(delivery.headers).not.to.have.property('x-service-signature');
      expect(signaturesOf(delivery, 'v1')).to.have.length(0);
      expect(signaturesOf(delivery, 'v1a')).to.have.length(1);
      expect(ed25519Verifies(endpoint.public_key, delivery)).to.equal(true);
      const headers = delivery.headers as Record<string, string>;
      expect(verifyStandardWebhook(endpoint.public_key, headers, delivery.rawBody)).to.include({ valid: true });
      const tampered = Buffer.from(delivery.rawBody.toString().replace('phi.read', 'phi.reax'));
      expect(verifyStandardWebhook(endpoint.public_key, headers, tampered)).to.deep.equal({ valid: false, reason: 'signature_mismatch' });
    });

    it('signs with both schemes and rotates the key with the secret: both keys sign during the overlap, then only the new one', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const { id, secret, endpoint } = await register(key, { url: target.url, signature_schemes: ['hmac', 'ed25519'] });
      const first = await deliverOne(tenantId, target);
      expect(verifyWebhookSignature(secret, String(first.headers['x-service-signature']), first.rawBody).valid).to.equal(true);
      expect(ed25519Verifies(endpoint.public_key, first)).to.equal(true);

      const rotated = await call(`${hooks()}/${id}/rotate-secret`, { key, body: { overlap_s: 2 } });
      expect(rotated.status, rotated.text).to.equal(200);
      const newKey = rotated.json.endpoint.public_key;
      expect(newKey).to.match(/^whpk_/);
      expect(newKey).not.to.equal(endpoint.public_key);
      const keys = await call(`${hooks()}/${id}/public-keys`, { key });
      expect(keys.json.public_keys).to.deep.equal([
        { public_key: newKey, expires_at: null },
        { public_key: endpoint.public_key, expires_at: rotated.json.previous_secret_expires_at },
      ]);
      const during = await deliverOne(tenantId, target);
      expect(signaturesOf(during, 'v1a')).to.have.length(2);
      expect(ed25519Verifies(endpoint.public_key, during)).to.equal(true);
      expect(ed25519Verifies(newKey, during)).to.equal(true);

      await untilInstant(Date.parse(rotated.json.previous_secret_expires_at));
      const after = await deliverOne(tenantId, target);
      expect(signaturesOf(after, 'v1a')).to.have.length(1);
      expect(ed25519Verifies(newKey, after)).to.equal(true);
      expect(ed25519Verifies(endpoint.public_key, after)).to.equal(false);
      expect((await call(`${hooks()}/${id}/public-keys`, { key })).json.public_keys).to.deep.equal([
        { public_key: newKey, expires_at: null },
      ]);
    });

    it('adds Ed25519 to an HMAC endpoint in place and keeps its key when the scheme is turned off and on again', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const { id, secret } = await register(key, { url: target.url });
      expect((await call(`${hooks()}/${id}/public-keys`, { key })).json.public_keys).to.deep.equal([]);
      const added = await call(`${hooks()}/${id}`, { key, method: 'PATCH', body: { signature_schemes: ['hmac', 'ed25519'] } });
      const publicKey = added.json.endpoint.public_key;
      expect(publicKey).to.match(/^whpk_/);
      const delivery = await deliverOne(tenantId, target);
      expect(ed25519Verifies(publicKey, delivery)).to.equal(true);
      expect(verifyWebhookSignature(secret, String(delivery.headers['x-service-signature']), delivery.rawBody).valid).to.equal(true);
      await call(`${hooks()}/${id}`, { key, method: 'PATCH', body: { signature_schemes: ['hmac'] } });
      expect(signaturesOf(await deliverOne(tenantId, target), 'v1a')).to.have.length(0);
      const again = await call(`${hooks()}/${id}`, { key, method: 'PATCH', body: { signature_schemes: ['ed25519', 'hmac'] } });
      expect(again.json.endpoint.public_key).to.equal(publicKey);
      const refused = await call(`${hooks()}/${id}`, { key, method: 'PATCH', body: { signature_schemes: [] } });
      expect(refused.status).to.equal(422);
    });
  });

  describe('enabling a disabled endpoint', () => {
    it('makes it active with its failure count at 0; what was cancelled stays cancelled; new events are delivered', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver('hang');
      const { id } = await register(key, { url: target.url, timeout_s: 1, retry_schedule_s: [60] });
      await seedEvents(db.url, [newEvent({ tenantId, action: 'phi.read' })]);
      await waitFor(async () => (await call(hooks(), { key })).json.endpoints[0].last_delivery_at !== null, 'a failed first attempt');
      await db.pool.query('UPDATE webhook_endpoints SET consecutive_failures = 7 WHERE id = $1', [id]);
      expect((await call(`${hooks()}/${id}/disable`, { key, method: 'POST' })).status).to.equal(200);

      const enabled = await call(`${hooks()}/${id}/enable`, { key, method: 'POST' });
      expect(enabled.status, enabled.text).to.equal(200);
      expect(enabled.json.endpoint).to.include({ id, active: true });
      const listedAfter = (await call(hooks(), { key })).json.endpoints[0];
      expect(listedAfter).to.include({ active: true, consecutive_failures: 0 });
      const again = await call(`${hooks()}/${id}/enable`, { key, method: 'POST' });
      expect(again.status).to.equal(200);
      const log = await call(`${hooks()}/${id}/deliveries`, { key });
      expect(log.json.deliveries.map((delivery: { status: string }) => delivery.status)).to.deep.equal(['failed']);

      target.reply(204);
      const delivered = await deliverOne(tenantId, target);
      expect(delivered.json().type).to.equal('phi.read');
      const trail = await call(`${service.baseUrl}/audit/events?action=admin.webhook.enable`, { key });
      expect(trail.json.events).to.have.length(1);
      expect(JSON.parse(trail.json.events[0].details)).to.include({ disabled_reason: 'manual', active: true });
    });

    it("answers 403 for another tenant's endpoint and 404 for an unknown id, as disable does, and changes nothing", async () => {
      const owner = await freshTenant();
      const other = await freshTenant();
      const { id } = await register(owner.key, { url: (await receiver()).url });
      await call(`${hooks()}/${id}/disable`, { key: owner.key, method: 'POST' });
      for (const path of ['enable', 'disable']) {
        const foreign = await call(`${hooks()}/${id}/${path}`, { key: other.key, method: 'POST' });
        expect(foreign.status, path).to.equal(403);
        expect(foreign.json.error).to.equal('forbidden');
      }
      const patch = await call(`${hooks()}/${id}`, { key: other.key, method: 'PATCH', body: { description: 'mine now' } });
      expect(patch.status).to.equal(403);
      expect((await call(`${hooks()}/wh_${'0'.repeat(32)}/enable`, { key: owner.key, method: 'POST' })).status).to.equal(404);
      expect((await call(`${hooks()}/not-an-id/enable`, { key: owner.key, method: 'POST' })).status).to.equal(404);
      expect((await call(hooks(), { key: owner.key })).json.endpoints[0]).to.include({ active: false, description: '' });
      const { key: reader } = await mintKey(db.url, { tenantId: 'signing-reader', scopes: ['audit:read'] });
      expect((await call(`${hooks()}/${id}/enable`, { key: reader, method: 'POST' })).status).to.equal(403);
    });
  });

  describe('ordered delivery', () => {
    /** A receiver that answers the first requests slowly and the later ones at once: out of order, were they concurrent. */
    async function outOfOrderReceiver() {
      let open = 0;
      let mostOpen = 0;
      const target = await receiver();
      target.reply((delivery) => {
        open += 1;
        mostOpen = Math.max(mostOpen, open);
        const index = target.received.indexOf(delivery);
        const delayMs = index < 3 ? 300 - index * 100 : 0;
        setTimeout(() => (open -= 1), delayMs);
        return { status: index === 4 ? 503 : 204, delayMs };
      });
      return { target, mostOpen: () => mostOpen };
    }

    it('sends one delivery at a time in the order the events were written, the next only after the one before ended', async () => {
      const { tenantId, key } = await freshTenant();
      const { target, mostOpen } = await outOfOrderReceiver();
      const { id } = await register(key, { url: target.url, ordered: true, retry_schedule_s: [1] });
      const events = Array.from({ length: 8 }, (_, index) => newEvent({ tenantId, action: 'phi.read', occurredAtMs: Date.now() + index }));
      for (const event of events) await seedEvents(db.url, [event]);
      await waitFor(() => target.received.length === 9, 'eight events and one retry', 20_000);
      expect(mostOpen()).to.equal(1);
      const arrived = target.received.map((delivery) => delivery.json().id);
      // The fifth answered 503: it is retried (after its 1 s) before the sixth goes.
      expect(arrived).to.deep.equal([...events.slice(0, 5), events[4]!, ...events.slice(5)].map((event) => event.eventId));
      // The last answer is recorded a moment after the receiver sent it.
      const succeeded = async () =>
        (await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1 AND state = 'succeeded'`, [id])).rows[0]
          .n as number;
      await waitFor(async () => (await succeeded()) === 8, 'all eight recorded as succeeded', 10_000);
    });

    it('releases what was queued when ordering is turned off', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver('hang');
      const { id } = await register(key, { url: target.url, ordered: true, timeout_s: 3 });
      await seedEvents(
        db.url,
        [1, 2, 3].map(() => newEvent({ tenantId, action: 'phi.read' })),
      );
      await waitFor(() => target.received.length === 1, 'the first delivery, hanging');
      const states = async () =>
        (await db.pool.query('SELECT state FROM deliveries WHERE endpoint_id = $1 ORDER BY id', [id])).rows.map((row) => row.state);
      expect(await states()).to.deep.equal(['pending', 'queued', 'queued']);
      const log = await call(`${hooks()}/${id}/deliveries`, { key });
      expect(log.json.deliveries.map((delivery: { status: string; next_attempt_at: string | null }) => delivery.status)).to.deep.equal([
        'pending',
        'pending',
        'pending',
      ]);
      target.reply(204);
      await call(`${hooks()}/${id}`, { key, method: 'PATCH', body: { ordered: false } });
      await waitFor(() => target.received.length === 3, 'the two released deliveries');
    });
  });
});
