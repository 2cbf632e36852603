import { expect } from 'chai';
import type { TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import type { Reply } from '../support/receiver.ts';
import { call, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';
import { startWebhookTestBed, type WebhookTestBed } from '../support/webhookTestBed.ts';

/** Payload filters, custom headers, and an endpoint's own timeout and retry schedule (docs/webhooks.md). */
describe('webhook endpoint settings', function () {
  this.timeout(60_000);
  let bed: WebhookTestBed;
  let db: TestDatabase;
  let service: TestService;

  before(async () => {
    bed = await startWebhookTestBed('settings', ['api', 'relay', 'worker'], { DELIVERY_SCHEDULE: '200ms,200ms,200ms,200ms' });
    ({ db, service } = bed);
  });

  after(async () => {
    await bed?.stop();
  });

  const freshTenant = () => bed.freshTenant();
  const receiver = (reply?: Reply) => bed.receiver(reply);
  const hooks = () => bed.hooks();

  async function register(key: string, body: Record<string, unknown>): Promise<{ id: string; secret: string; endpoint: any }> {
    const response = await call(hooks(), { key, body });
    expect(response.status, response.text).to.equal(201);
    return { id: response.json.endpoint.id, secret: response.json.secret, endpoint: response.json.endpoint };
  }

  const change = (key: string, id: string, body: unknown) => call(`${hooks()}/${id}`, { key, method: 'PATCH', body });
  const listed = async (key: string, id: string) =>
    (await call(hooks(), { key })).json.endpoints.find((endpoint: { id: string }) => endpoint.id === id);

  async function deliveriesOf(endpointId: string): Promise<Array<{ state: string; attempts: number }>> {
    const { rows } = await db.pool.query('SELECT state, attempts FROM deliveries WHERE endpoint_id = $1 ORDER BY id', [endpointId]);
    return rows;
  }

  describe('payload filters', () => {
    const wardFilter = {
      all: [
        { path: 'details.ward', in: ['3B', '4C'] },
        { path: 'resource.type', equals: 'patient_record' },
      ],
    };

    it('refuses a bad filter with a 422 naming its place, at registration and in a change, and changes nothing', async () => {
      const { key } = await freshTenant();
      const target = await receiver();
      const refused = await call(hooks(), {
        key,
        body: {
          url: target.url,
          payload_filter: {
            all: [
              { path: 'type', equals: 'phi.read' },
              { path: 'actor.name', equals: 'x' },
            ],
          },
        },
      });
      expect(refused.status).to.equal(422);
      expect(refused.json.error).to.equal('validation_failed');
      expect(refused.json.details).to.have.length(1);
      expect(refused.json.details[0].field).to.equal('payload_filter.all.1.path');
      expect(refused.json.details[0].message).to.include('"actor.name" is not a member a filter can read');
      expect((await call(hooks(), { key })).json.endpoints).to.deep.equal([]);

      const { id } = await register(key, { url: target.url, payload_filter: wardFilter });
      const bad = await change(key, id, { payload_filter: { path: 'details.ward', equals: { nested: true } } });
      expect(bad.status).to.equal(422);
      expect(bad.json.details[0].field).to.equal('payload_filter.equals');
      expect((await listed(key, id)).payload_filter).to.deep.equal(wardFilter);
    });

    it('delivers only the events whose body meets the filter, from either stored form; what it leaves out is no delivery', async () => {
      const { tenantId, key } = await freshTenant();
      const filtered = await receiver();
      const everything = await receiver();
      const { id, endpoint } = await register(key, { url: filtered.url, event_filter: ['phi.'], payload_filter: wardFilter });
      expect(endpoint.payload_filter).to.deep.equal(wardFilter);
      const { id: allId } = await register(key, { url: everything.url, event_filter: ['phi.'] });
      const eventsOf = (mark: string) => [
        newEvent({ tenantId, resourceType: 'patient_record', details: JSON.stringify({ ward: '3B', mark }) }),
        newEvent({ tenantId, resourceType: 'patient_record', details: JSON.stringify({ ward: '5A', mark }) }),
        newEvent({ tenantId, resourceType: 'claim', details: JSON.stringify({ ward: '4C', mark }) }),
        newEvent({ tenantId, resourceType: 'patient_record', details: JSON.stringify({ mark }) }),
      ];
      const compact = eventsOf('compact');
      await seedEvents(db.url, compact);
      // The full form of earlier releases, which a database keeps until `audit-trail events compact`.
      await db.pool.query(`UPDATE event_storage SET form = 'full'`);
      try {
        const full = eventsOf('full');
        await seedEvents(db.url, full);
        await waitFor(() => everything.received.length === 8, 'every event at the endpoint without a filter');
        await waitFor(() => filtered.received.length === 2, 'the two matching events');
        expect(filtered.received.map((delivery) => delivery.json().id).sort()).to.deep.equal(
          [compact[0]!.eventId, full[0]!.eventId].sort(),
        );
      } finally {
        await db.pool.query(`UPDATE event_storage SET form = 'compact'`);
      }
      await waitFor(async () => (await deliveriesOf(id)).every((delivery) => delivery.state === 'succeeded'), 'both recorded');
      expect(await deliveriesOf(id)).to.have.length(2);
      expect(await deliveriesOf(allId)).to.have.length(8);
      const log = await call(`${hooks()}/${id}/deliveries`, { key });
      expect(log.json.deliveries.map((delivery: { status: string }) => delivery.status)).to.deep.equal(['succeeded', 'succeeded']);
    });

    it('applies a filter changed in place to the events written after the change; null removes it', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const { id } = await register(key, {
        url: target.url,
        event_filter: ['phi.'],
        payload_filter: { path: 'actor.user_id', prefix: 'svc-' },
      });
      await seedEvents(db.url, [newEvent({ tenantId, userId: 'svc-a' }), newEvent({ tenantId, userId: 'dr-b' })]);
      await waitFor(() => target.received.length === 1, 'the svc- event');
      const changed = await change(key, id, { payload_filter: { path: 'details.urgent', exists: true } });
      expect(changed.status, changed.text).to.equal(200);
      expect(changed.json.endpoint.payload_filter).to.deep.equal({ path: 'details.urgent', exists: true });
      await seedEvents(db.url, [newEvent({ tenantId, userId: 'svc-c' }), newEvent({ tenantId, details: '{"urgent":false}' })]);
      await waitFor(() => target.received.length === 2, 'the urgent event');
      expect(target.received[1]!.json().details).to.deep.equal({ urgent: false });
      expect((await change(key, id, { payload_filter: null })).json.endpoint.payload_filter).to.equal(null);
      await seedEvents(db.url, [newEvent({ tenantId, userId: 'anyone' })]);
      await waitFor(() => target.received.length === 3, 'any event');
    });

    it('replays a range through the filter, as fan-out would have selected it', async () => {
      const { tenantId, key } = await freshTenant();
      const past = Date.now() - 60_000;
      const events = ['3B', '5A', '3B'].map((ward, index) =>
        newEvent({ tenantId, occurredAtMs: past + index, resourceType: 'patient_record', details: JSON.stringify({ ward }) }),
      );
      await seedEvents(db.url, events);
      const target = await receiver();
      const { id } = await register(key, { url: target.url, event_filter: ['phi.'], payload_filter: wardFilter });
      const replay = await call(`${hooks()}/${id}/replay`, {
        key,
        body: { since: new Date(past - 1000).toISOString(), until: new Date().toISOString() },
      });
      expect(replay.status, replay.text).to.equal(202);
      await waitFor(
        async () => (await call(`${hooks()}/${id}/replays/${replay.json.replay.id}`, { key })).json.replay.status === 'completed',
        'the replay',
      );
      await waitFor(() => target.received.length === 2, 'the two matching events');
      expect(target.received.map((delivery) => delivery.json().id).sort()).to.deep.equal([events[0]!.eventId, events[2]!.eventId].sort());
      expect((await call(`${hooks()}/${id}/replays/${replay.json.replay.id}`, { key })).json.replay).to.include({
        events_matched: 2,
        deliveries_created: 2,
      });
    });
  });

  describe('custom headers', () => {
    it('sends them with every delivery and test send; their values are never shown, logged in the trail or stored in the clear', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver();
      const token = 'Bearer s3cr3t-gateway-token';
      const { id, endpoint } = await register(key, {
        url: target.url,
        event_filter: ['phi.'],
        headers: { Authorization: token, 'X-Team': 'compliance' },
      });
      expect(endpoint.header_names).to.deep.equal(['Authorization', 'X-Team']);
      await seedEvents(db.url, [newEvent({ tenantId })]);
      await waitFor(() => target.received.length === 1, 'the delivery');
      expect(target.received[0]!.json().type).to.equal('phi.read');
      expect(target.received[0]!.headers).to.include({ authorization: token, 'x-team': 'compliance' });
      expect(target.received[0]!.headers['x-service-signature']).to.be.a('string');
      expect((await call(`${hooks()}/${id}/test`, { key, method: 'POST' })).json.success).to.equal(true);
      expect(target.received[1]!.headers.authorization).to.equal(token);

      const changed = await change(key, id, { headers: { authorization: 'Bearer rotated', 'X-Team': null, 'X-Tier': 'gold' } });
      expect(changed.status, changed.text).to.equal(200);
      expect(changed.json.endpoint.header_names).to.deep.equal(['authorization', 'X-Tier']);
      await seedEvents(db.url, [newEvent({ tenantId })]);
      await waitFor(() => target.received.length === 3, 'the delivery after the change');
      expect(target.received[2]!.json().type).to.equal('phi.read');
      expect(target.received[2]!.headers).to.include({ authorization: 'Bearer rotated', 'x-tier': 'gold' });
      expect(target.received[2]!.headers).not.to.have.property('x-team');

      for (const text of [JSON.stringify(endpoint), changed.text, (await call(hooks(), { key })).text]) {
        expect(text).not.to.include('s3cr3t');
        expect(text).not.to.include('rotated');
      }
      const trail = await call(`${service.baseUrl}/audit/events?resource_type=webhook_endpoint&limit=100`, { key });
      expect(trail.text).to.include('X-Tier');
      expect(trail.text).not.to.include('s3cr3t');
      expect(trail.text).not.to.include('Bearer rotated');
      const stored = await db.pool.query('SELECT headers_ciphertext FROM webhook_endpoints WHERE id = $1', [id]);
      expect(stored.rows[0].headers_ciphertext.toString('latin1')).not.to.include('rotated');
    });

    it('refuses reserved names, at registration and in a change, with a 422 naming the header', async () => {
      const { key } = await freshTenant();
      const target = await receiver();
      for (const name of ['Content-Type', 'Host', 'X-Service-Signature', 'webhook-id', 'Transfer-Encoding', 'Connection']) {
        const refused = await call(hooks(), { key, body: { url: target.url, headers: { [name]: 'x' } } });
        expect(refused.status, name).to.equal(422);
        expect(refused.json.details[0].field).to.equal(`headers.${name}`);
        expect(refused.json.details[0].message).to.match(/^is reserved/);
      }
      const { id } = await register(key, { url: target.url });
      const refused = await change(key, id, { headers: { 'Webhook-Signature': 'v1,forged' } });
      expect(refused.status).to.equal(422);
      expect((await listed(key, id)).header_names).to.deep.equal([]);
    });
  });

  describe("an endpoint's own time limit and retry schedule", () => {
    it("fails an attempt after the endpoint's timeout, where the default's would have waited", async () => {
      const { key } = await freshTenant();
      const slow = await receiver({ status: 204, delayMs: 1_500 });
      const { id: quick } = await register(key, { url: slow.url, timeout_s: 1 });
      const { id: patient } = await register(key, { url: slow.url });
      const short = await call(`${hooks()}/${quick}/test`, { key, method: 'POST' });
      expect(short.json).to.include({ success: false, status_code: null, error: 'timeout: no complete response within 1000 ms' });
      expect(short.json.duration_ms).to.be.within(900, 1_400);
      const long = await call(`${hooks()}/${patient}/test`, { key, method: 'POST' });
      expect(long.json).to.include({ success: true, status_code: 204 });
      const refused = await change(key, quick, { timeout_s: 31 });
      expect(refused.status).to.equal(422);
      expect(refused.json.details[0].field).to.equal('timeout_s');
    });

    it("retries on the endpoint's own schedule, and with [] makes one attempt only", async () => {
      const { tenantId, key } = await freshTenant();
      const down = await receiver(503);
      const { id } = await register(key, { url: down.url, event_filter: ['phi.'], retry_schedule_s: [1, 1] });
      const once = await receiver(503);
      const { id: onceId } = await register(key, { url: once.url, event_filter: ['phi.'], retry_schedule_s: [] });
      expect((await listed(key, id)).retry_schedule_s).to.deep.equal([1, 1]);
      await seedEvents(db.url, [newEvent({ tenantId, action: 'phi.read' })]);
      await waitFor(async () => (await deliveriesOf(id))[0]?.state === 'failed', 'the delivery failed after its schedule', 15_000);
      expect(down.received).to.have.length(3);
      const gaps = down.received.slice(1).map((delivery, index) => delivery.receivedAt - down.received[index]!.receivedAt);
      // 1 s ± 20 %, not the service's 200 ms.
      for (const gap of gaps) expect(gap).to.be.within(790, 1_600);
      await waitFor(async () => (await deliveriesOf(onceId))[0]?.state === 'failed', 'the single attempt failed');
      expect(once.received).to.have.length(1);
      expect(await deliveriesOf(onceId)).to.deep.equal([{ state: 'failed', attempts: 1 }]);
      const refused = await change(key, id, { retry_schedule_s: [86_400, 86_400, 86_400, 86_400] });
      expect(refused.status).to.equal(422);
      expect(refused.json.details[0]).to.include({ field: 'retry_schedule_s' });
    });

    it('shows every setting on the endpoint, null for the defaults, and changes only what a change names', async () => {
      const { key } = await freshTenant();
      const target = await receiver();
      const { id, endpoint } = await register(key, { url: target.url });
      expect(endpoint).to.deep.include({
        kind: 'events',
        payload_filter: null,
        header_names: [],
        timeout_s: null,
        retry_schedule_s: null,
        rate_limit_per_s: null,
        ordered: false,
        signature_schemes: ['hmac'],
        public_key: null,
      });
      const changed = await change(key, id, { rate_limit_per_s: 20, description: 'throttled' });
      expect(changed.json.endpoint).to.deep.include({ rate_limit_per_s: 20, description: 'throttled', url: target.url, timeout_s: null });
      expect((await change(key, id, { rate_limit_per_s: null })).json.endpoint.rate_limit_per_s).to.equal(null);
      const unknown = await change(key, id, { kind: 'operational' });
      expect(unknown.status).to.equal(422);
      expect(unknown.json.details[0]).to.deep.equal({ field: 'kind', message: 'is not a known field' });
    });
  });
});
