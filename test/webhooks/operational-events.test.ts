import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { verifyStandardWebhook, verifyWebhookSignature } from '../../src/client/index.ts';
import { recordOperationalEvent } from '../../src/delivery/operationalFanOut.ts';
import type { TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair } from '../support/integrity.ts';
import type { ReceivedDelivery, Reply, TestReceiver } from '../support/receiver.ts';
import { call, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';
import { startWebhookTestBed, type WebhookTestBed } from '../support/webhookTestBed.ts';

/**
 * Operational endpoints (docs/webhooks.md "Operational events"): the service's notices about a tenant's own
 * endpoints and streams, delivered like events (signed, retried) to the tenant's operational endpoints only,
 * and listed by the API.
 */
describe('operational events', function () {
  this.timeout(60_000);
  let bed: WebhookTestBed;
  let db: TestDatabase;
  let service: TestService;

  before(async () => {
    bed = await startWebhookTestBed('ops', ['api', 'relay', 'worker', 'sealer', 'streams'], {
      DELIVERY_SCHEDULE: '50ms,50ms,50ms,50ms',
      SEAL_SIGNING_KEY: sealKeyPair().privatePem,
      SEAL_INTERVAL: '200ms',
      STREAMS_POLL_MS: '100',
      STREAMS_FAILING_RETRY_MS: '300',
    });
    ({ db, service } = bed);
  });

  after(async () => {
    await bed?.stop();
  });

  const freshTenant = () => bed.freshTenant(['audit:read', 'webhooks:write', 'streams:write']);
  const receiver = (reply?: Reply) => bed.receiver(reply);
  const hooks = () => bed.hooks();

  async function register(key: string, body: Record<string, unknown>) {
    const response = await call(hooks(), { key, body });
    expect(response.status, response.text).to.equal(201);
    return { id: response.json.endpoint.id as string, secret: response.json.secret as string };
  }

  const typesOf = (target: TestReceiver) => target.received.map((delivery) => delivery.json().type as string);
  const noticeOf = (target: TestReceiver, type: string): ReceivedDelivery =>
    target.received.find((delivery) => delivery.json().type === type)!;

  it("tells an operational endpoint that an endpoint is failing and then disabled, signed and retried like any delivery, and never tells the trail's endpoints", async () => {
    const { tenantId, key } = await freshTenant();
    const operational = await receiver();
    // The first attempt of every notice fails: the notice is retried like any delivery.
    operational.reply((delivery) => (delivery.headers['x-service-delivery-attempt'] === '1' ? 503 : 204));
    const { id: opsId, secret: opsSecret } = await register(key, { url: operational.url, kind: 'operational' });
    const everything = await receiver();
    await register(key, { url: everything.url });
    const failing = await receiver(500);
    const { id: failingId } = await register(key, { url: failing.url, event_filter: ['phi.'], description: 'the SIEM' });

    await seedEvents(
      db.url,
      Array.from({ length: 10 }, () => newEvent({ tenantId, action: 'phi.read' })),
    );
    await waitFor(
      () => typesOf(operational).filter((type) => type === 'endpoint.disabled').length === 2,
      'both attempts of the disabled notice',
      20_000,
    );
    expect(new Set(typesOf(operational))).to.deep.equal(new Set(['endpoint.failing', 'endpoint.disabled']));
    const disabled = noticeOf(operational, 'endpoint.disabled').json();
    expect(disabled).to.deep.include({
      tenant_id: tenantId,
      actor: { user_id: 'audit-trail', user_role: 'system' },
      resource: { type: 'webhook_endpoint', id: failingId },
      phi_involved: false,
      success: false,
      schema_version: '1',
    });
    expect(disabled.details).to.include({ reason: 'auto', consecutive_failures: 10, url: failing.url, description: 'the SIEM' });
    // Sent when the count reached 5, with the threshold ahead. The batch that crossed 5 may have counted more,
    // up to all ten when one batch of outcomes took it past both thresholds (CI saw 10 on a busy machine).
    const failingDetails = noticeOf(operational, 'endpoint.failing').json().details;
    expect(failingDetails.consecutive_failures).to.be.within(5, 10);
    expect(failingDetails.auto_disable_after).to.equal(10);
    for (const delivery of operational.received) {
      expect(verifyWebhookSignature(opsSecret, String(delivery.headers['x-service-signature']), delivery.rawBody).valid).to.equal(true);
      expect(verifyStandardWebhook(opsSecret, delivery.headers as Record<string, string>, delivery.rawBody).valid).to.equal(true);
    }
    // The endpoint that takes every event got the trail's events (the admin ones among them) and no notice.
    await waitFor(() => typesOf(everything).includes('admin.webhook.auto_disable'), 'the auto_disable admin event');
    expect(typesOf(everything).filter((type) => type.startsWith('endpoint.'))).to.deep.equal([]);
    // And the operational endpoint got no event of the trail.
    expect(typesOf(operational).filter((type) => !type.startsWith('endpoint.'))).to.deep.equal([]);
    const log = await call(`${hooks()}/${opsId}/deliveries`, { key });
    expect(log.json.deliveries.map((delivery: { action: string }) => delivery.action).sort()).to.deep.equal([
      'endpoint.disabled',
      'endpoint.failing',
    ]);

    // Enabled again: endpoint.enabled, good news.
    expect((await call(`${hooks()}/${failingId}/enable`, { key, method: 'POST' })).status).to.equal(200);
    await waitFor(() => typesOf(operational).includes('endpoint.enabled'), 'the enabled notice');
    expect(noticeOf(operational, 'endpoint.enabled').json()).to.include({ success: true });

    const listed = await call(`${hooks()}/operational-events?limit=2`, { key });
    expect(listed.status, listed.text).to.equal(200);
    expect(listed.json.events.map((event: { type: string }) => event.type)).to.deep.equal(['endpoint.enabled', 'endpoint.disabled']);
    expect(listed.json.events[0]).to.deep.include({ resource: { type: 'webhook_endpoint', id: failingId } });
    expect(listed.json.page).to.include({ limit: 2, returned: 2, has_more: true });
    const rest = await call(`${hooks()}/operational-events?limit=2&cursor=${listed.json.page.next_cursor}`, { key });
    expect(rest.json.events.map((event: { type: string }) => event.type)).to.deep.equal(['endpoint.failing']);
    expect(rest.json.page.has_more).to.equal(false);
    // Each notice's body id is its id in the list.
    expect(listed.json.events[0].id).to.equal(noticeOf(operational, 'endpoint.enabled').json().id);
  });

  it('lists notices of one transaction newest first, as the outcome recorder writes failing and then disabled', async () => {
    const { tenantId, key } = await freshTenant();
    // Six, each of its own endpoint: with one time for all, the list's order (ties by random id) would match
    // by chance once in 720; with two, every other run.
    const endpoints = Array.from({ length: 6 }, () => randomUUID());
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      for (const [index, id] of endpoints.entries())
        await recordOperationalEvent(client, {
          tenantId,
          type: index % 2 === 0 ? 'endpoint.failing' : 'endpoint.disabled',
          resource: { type: 'webhook_endpoint', id },
          success: false,
          details: {},
        });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const listed = await call(`${hooks()}/operational-events?limit=10`, { key });
    expect(listed.status, listed.text).to.equal(200);
    expect(listed.json.events.map((event: { resource: { id: string } }) => event.resource.id)).to.deep.equal(endpoints.toReversed());
  });

  it('pages through notices of one millisecond without skipping any (positions kept in microseconds)', async () => {
    const { tenantId, key } = await freshTenant();
    // Failing and disabled notices of one batch of outcomes share a millisecond; five here, microseconds apart.
    await db.pool.query(
      `INSERT INTO webhook_operational_events (id, tenant_id, occurred_at, type, resource_type, resource_id, success, details)
       SELECT gen_random_uuid(), $1, timestamptz '2026-12-05 10:00:00.123' + i * interval '1 microsecond',
              'endpoint.failing', 'webhook_endpoint', 'wh_' || i, false, '{}'
         FROM generate_series(1, 5) AS i`,
      [tenantId],
    );
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await call(`${hooks()}/operational-events?limit=2${cursor ? `&cursor=${cursor}` : ''}`, { key });
      expect(page.status, page.text).to.equal(200);
      seen.push(...page.json.events.map((event: { resource: { id: string } }) => event.resource.id));
      cursor = page.json.page.next_cursor ?? undefined;
    } while (cursor);
    expect(seen).to.deep.equal(['wh_5', 'wh_4', 'wh_3', 'wh_2', 'wh_1']);
  });

  it('filters notices by type with the event filter, and refuses replays to an operational endpoint', async () => {
    const { tenantId, key } = await freshTenant();
    const operational = await receiver();
    const { id } = await register(key, { url: operational.url, kind: 'operational', event_filter: ['endpoint.disabled'] });
    const { id: other } = await register(key, { url: (await receiver()).url, event_filter: ['phi.'] });
    await call(`${hooks()}/${other}/disable`, { key, method: 'POST' });
    await call(`${hooks()}/${other}/enable`, { key, method: 'POST' });
    await seedEvents(db.url, [newEvent({ tenantId, action: 'phi.read' })]);
    await waitFor(() => operational.received.length === 1, 'the disabled notice');
    expect(operational.received[0]!.json()).to.deep.include({ type: 'endpoint.disabled' });
    expect(operational.received[0]!.json().details).to.include({ reason: 'manual' });
    const replay = await call(`${hooks()}/${id}/replay`, {
      key,
      body: { since: new Date(Date.now() - 60_000).toISOString(), until: new Date().toISOString() },
    });
    expect(replay.status).to.equal(409);
    expect(replay.json.error).to.equal('endpoint_operational');
  });

  it("tells the stream's owner that its stream is failing and, once its destination takes batches again, that it recovered", async () => {
    const { tenantId, key } = await freshTenant();
    const operational = await receiver();
    await register(key, { url: operational.url, kind: 'operational', event_filter: ['stream.'] });
    const collector = await receiver(401);
    const created = await call(`${service.baseUrl}/audit/streams`, { key, body: { destination: { type: 'https', url: collector.url } } });
    expect(created.status, created.text).to.equal(201);
    const streamId = created.json.stream.id;
    await seedEvents(db.url, [newEvent({ tenantId, action: 'phi.read' })]);
    await waitFor(() => typesOf(operational).includes('stream.failing'), 'the failing notice', 20_000);
    const failingNotice = noticeOf(operational, 'stream.failing').json();
    expect(failingNotice).to.deep.include({ resource: { type: 'log_stream', id: streamId }, success: false });
    expect(failingNotice.details).to.include({ destination_type: 'https' });
    expect(failingNotice.details.reason).to.include('401');
    collector.reply(204);
    await waitFor(() => typesOf(operational).includes('stream.recovered'), 'the recovered notice', 20_000);
    expect(noticeOf(operational, 'stream.recovered').json()).to.deep.include({ success: true });
    expect(typesOf(operational).filter((type) => type === 'stream.failing')).to.have.length(1);
  });
});
