import { expect } from 'chai';
import { AuditTrailApiError, AuditTrailClient } from '../../src/client/index.ts';
import {
  deliveryDetailSchema,
  deliveryEnvelopeSchema,
  deliveryListSchema,
  replayEnvelopeSchema,
} from '../../src/http/routes/webhookDeliveries.ts';
import { responseExcerpt } from '../../src/webhooks/responseExcerpt.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

// One retry an hour after the first attempt: a failed first attempt leaves the delivery pending for an
// hour, so only a manual retry can bring its next attempt within the test; the second attempt is its last.
const ENV = { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_SCHEDULE: '1h', DELIVERY_RELAY_POLL_MS: '50' };
const DAY_MS = 86_400_000;

describe('webhook delivery log, manual retry and replay', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  const receivers: TestReceiver[] = [];
  let tenantCounter = 0;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({ databaseUrl: db.url, roles: ['api', 'relay', 'worker'], env: ENV });
  });

  after(async () => {
    await service?.stop();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await db?.drop();
  });

  async function freshTenant(scopes = ['audit:read', 'webhooks:write']) {
    tenantCounter += 1;
    const tenantId = `ops-${tenantCounter}`;
    const { key } = await mintKey(db.url, { tenantId, scopes });
    return { tenantId, key };
  }

  async function receiver(reply: Parameters<typeof startReceiver>[0] = 204): Promise<TestReceiver> {
    const started = await startReceiver(reply);
    receivers.push(started);
    return started;
  }

  async function register(key: string, url: string, eventFilter: string[] = []): Promise<string> {
    const response = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url, event_filter: eventFilter } });
    expect(response.status, response.text).to.equal(201);
    return response.json.endpoint.id;
  }

  const api = (path: string) => `${service.baseUrl}/audit/webhooks/${path}`;

  async function deliveryOf(endpointId: string, eventId: string): Promise<{ id: string; state: string; attempts: number }> {
    const { rows } = await db.pool.query(
      `SELECT 'dlv_' || id AS id, state, attempts FROM deliveries WHERE endpoint_id = $1 AND event_id = $2 ORDER BY id DESC LIMIT 1`,
      [endpointId, eventId],
    );
    return rows[0];
  }

  async function consecutiveFailures(endpointId: string): Promise<number> {
    const { rows } = await db.pool.query('SELECT consecutive_failures FROM webhook_endpoints WHERE id = $1', [endpointId]);
    return rows[0].consecutive_failures;
  }

  async function trailActions(tenantId: string, prefix: string): Promise<string[]> {
    const { rows } = await db.pool.query(
      `SELECT action FROM events WHERE tenant_id = $1 AND starts_with(action, $2) ORDER BY occurred_at`,
      [tenantId, prefix],
    );
    return rows.map((row) => row.action);
  }

  /** Every table these paths could change, to show that a refused request changed nothing. */
  async function snapshot(tenantId: string): Promise<string> {
    const { rows } = await db.pool.query(
      `SELECT (SELECT json_agg(d ORDER BY id) FROM (SELECT id, state, attempts, due_at, published_at, failure_counted FROM deliveries WHERE tenant_id = $1) d)::text AS deliveries,
              (SELECT json_agg(r ORDER BY id) FROM webhook_replays r WHERE tenant_id = $1)::text AS replays,
              (SELECT count(*) FROM events WHERE tenant_id = $1) AS events`,
      [tenantId],
    );
    return JSON.stringify(rows[0]);
  }

  describe('delivery log', () => {
    it('lists deliveries newest first, pages with an opaque cursor, and filters by status and time', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver(204);
      target.reply((delivery) => (delivery.json().type === 'phi.fail' ? 503 : 204));
      const id = await register(key, target.url, ['phi.']);
      const ok = Array.from({ length: 7 }, () => newEvent({ tenantId, action: 'phi.read' }));
      const failing = Array.from({ length: 3 }, () => newEvent({ tenantId, action: 'phi.fail' }));
      for (const event of [...ok, ...failing]) await seedEvents(db.url, [event]);
      await waitFor(() => target.received.length === 10, 'ten first attempts');
      await waitFor(
        async () =>
          (await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1 AND attempts = 1`, [id])).rows[0].n === 10,
        'attempts recorded',
      );

      const seen: any[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const query: string = cursor ? `?limit=3&cursor=${encodeURIComponent(cursor)}` : '?limit=3';
        const page = await call(api(`${id}/deliveries${query}`), { key });
        expect(page.status, page.text).to.equal(200);
        // What the OpenAPI document promises.
        deliveryListSchema.parse(page.json);
        expect(page.json.page).to.include({ limit: 3, returned: page.json.deliveries.length });
        seen.push(...page.json.deliveries);
        cursor = page.json.page.next_cursor;
        expect(page.json.page.has_more).to.equal(cursor !== null);
        pages += 1;
      } while (cursor);
      expect(pages).to.equal(4);
      expect(seen).to.have.length(10);
      expect(new Set(seen.map((delivery) => delivery.id)).size).to.equal(10);
      // Newest first: the events were written one after another.
      expect(seen.map((delivery) => delivery.event_id)).to.deep.equal([...ok, ...failing].map((event) => event.eventId).reverse());
      const failed = seen.find((delivery) => delivery.event_id === failing[0]!.eventId);
      expect(failed).to.include({ action: 'phi.fail', status: 'pending', attempts: 1, last_status_code: 503, last_error: null });
      expect(failed.id).to.match(/^dlv_\d+$/);
      expect(Date.parse(failed.next_attempt_at) - Date.now()).to.be.above(30 * 60_000);
      expect(Date.parse(failed.last_attempt_at)).to.be.closeTo(Date.now(), 30_000);
      const succeeded = seen.find((delivery) => delivery.event_id === ok[0]!.eventId);
      expect(succeeded).to.include({ status: 'succeeded', attempts: 1, last_status_code: 204, next_attempt_at: null });

      const pending = await call(api(`${id}/deliveries?status=pending`), { key });
      expect(pending.json.deliveries.map((delivery: any) => delivery.event_id).sort()).to.deep.equal(
        failing.map((event) => event.eventId).sort(),
      );
      const succeededOnly = await call(api(`${id}/deliveries?status=succeeded&limit=100`), { key });
      expect(succeededOnly.json.deliveries).to.have.length(7);
      expect((await call(api(`${id}/deliveries?status=failed`), { key })).json.deliveries).to.have.length(0);
      const future = new Date(Date.now() + DAY_MS).toISOString();
      expect((await call(api(`${id}/deliveries?since=${future}`), { key })).json.deliveries).to.have.length(0);
      const all = await call(api(`${id}/deliveries?until=${future}&since=2020-01-01T00:00:00Z`), { key });
      expect(all.json.deliveries).to.have.length(10);
      expect(all.json.page).to.deep.equal({ limit: 50, returned: 10, next_cursor: null, has_more: false });

      // A cursor belongs to the query that issued it, as on the event list.
      const first = await call(api(`${id}/deliveries?limit=2`), { key });
      const issued = encodeURIComponent(first.json.page.next_cursor);
      const misuse = [
        `${id}/deliveries?limit=2&status=pending&cursor=${issued}`,
        `${id}/deliveries?limit=2&since=2020-01-01T00:00:00Z&cursor=${issued}`,
        `${id}/deliveries?limit=2&cursor=${issued}x`,
      ];
      for (const path of misuse) {
        const refused = await call(api(path), { key });
        expect(refused.status, path).to.equal(422);
        expect(refused.json).to.deep.include({ error: 'validation_failed' });
        expect(refused.json.details).to.deep.equal([
          { field: 'cursor', message: 'is not a cursor issued for this query; start again without it' },
        ]);
      }
      // An event-list cursor is not a delivery-log cursor.
      const events = await call(`${service.baseUrl}/audit/events?limit=1`, { key });
      const eventCursor = encodeURIComponent(events.json.page.next_cursor);
      expect((await call(api(`${id}/deliveries?cursor=${eventCursor}`), { key })).status).to.equal(422);
    });

    it('shows a delivery with its attempts and at most 1 KiB of valid text from each response', async () => {
      const { tenantId, key } = await freshTenant();
      // 3-byte characters, a NUL and far more than 1 KiB.
      const target = await receiver({ status: 500, body: `\u0000${'€'.repeat(2000)}` });
      const id = await register(key, target.url, ['phi.']);
      const event = newEvent({ tenantId, action: 'phi.read' });
      await seedEvents(db.url, [event]);
      await waitFor(async () => (await deliveryOf(id, event.eventId))?.attempts === 1, 'the first attempt recorded');
      const { id: deliveryId } = await deliveryOf(id, event.eventId);
      const detail = await call(api(`${id}/deliveries/${deliveryId}`), { key });
      expect(detail.status, detail.text).to.equal(200);
      deliveryDetailSchema.parse(detail.json);
      expect(detail.json.delivery).to.include({
        id: deliveryId,
        event_id: event.eventId,
        status: 'pending',
        attempts: 1,
        last_status_code: 500,
      });
      expect(detail.json.attempts).to.have.length(1);
      const [attempt] = detail.json.attempts;
      expect(attempt).to.include({ attempt: 1, status_code: 500, error: null });
      expect(attempt.duration_ms).to.be.a('number');
      expect(Date.parse(attempt.started_at)).to.be.closeTo(Date.now(), 30_000);
      const excerptBytes = Buffer.byteLength(attempt.response_excerpt);
      expect(excerptBytes).to.be.at.most(1024).and.at.least(1020);
      expect(attempt.response_excerpt).not.to.include('\u0000');
      expect(attempt.response_excerpt.startsWith('\uFFFD€€')).to.equal(true);
      expect(attempt.response_excerpt.endsWith('€')).to.equal(true);

      expect((await call(api(`${id}/deliveries/dlv_999999999`), { key })).status).to.equal(404);
      for (const bad of ['dlv_x', '123', 'dlv_0', 'dlv_-1', `dlv_${'9'.repeat(30)}`]) {
        const refused = await call(api(`${id}/deliveries/${bad}`), { key });
        expect(refused.status, bad).to.equal(404);
        expect(refused.json.error).to.equal('not_found');
      }
      // Another endpoint's delivery is not this endpoint's.
      const other = await register(key, target.url, ['phi.']);
      expect((await call(api(`${other}/deliveries/${deliveryId}`), { key })).status).to.equal(404);
    });

    it('keeps excerpts of binary and cut-off bodies as bounded, valid text without NUL', () => {
      expect(responseExcerpt(Buffer.from('ok'))).to.equal('ok');
      // A 3-byte character cut by the limit is left out rather than half kept.
      const cut = responseExcerpt(Buffer.from(`${'a'.repeat(1022)}€`));
      expect(cut).to.equal('a'.repeat(1022));
      // Invalid bytes become U+FFFD, whose three bytes must not push the excerpt past 1 KiB.
      const binary = responseExcerpt(Buffer.alloc(1024, 0xff));
      expect(Buffer.byteLength(binary)).to.be.at.most(1024);
      expect(binary).to.match(/^\uFFFD+$/);
      const nuls = responseExcerpt(Buffer.alloc(2048, 0));
      expect(nuls).not.to.include('\u0000');
      expect(Buffer.byteLength(nuls)).to.be.at.most(1024);
      expect(Buffer.from(nuls).toString('utf8')).to.equal(nuls);
    });
  });

  describe('manual retry', () => {
    it('makes one attempt within a second for a pending delivery, whatever its schedule', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver(503);
      const id = await register(key, target.url, ['phi.']);
      const event = newEvent({ tenantId });
      await seedEvents(db.url, [event]);
      await waitFor(async () => (await deliveryOf(id, event.eventId))?.attempts === 1, 'the first attempt');
      const { id: deliveryId } = await deliveryOf(id, event.eventId);
      // Owned by a Kubernetes WebhookEndpoint resource: a retry changes no configuration, so it is allowed.
      await db.pool.query(`UPDATE webhook_endpoints SET managed_by = 'team-a/siem' WHERE id = $1`, [id]);
      expect((await call(api(`${id}/disable`), { key, method: 'POST' })).json.error).to.equal('managed_by_kubernetes');
      target.reply(204);
      const before = target.received.length;
      const asked = Date.now();
      const retried = await call(api(`${id}/deliveries/${deliveryId}/retry`), { key, method: 'POST' });
      expect(retried.status, retried.text).to.equal(202);
      deliveryEnvelopeSchema.parse(retried.json);
      expect(retried.json.delivery).to.include({ id: deliveryId, status: 'pending', attempts: 1 });
      expect(Date.parse(retried.json.delivery.next_attempt_at)).to.be.at.most(Date.now() + 1000);
      await waitFor(() => target.received.length === before + 1, 'the retry', 5_000, 10);
      expect(target.received.at(-1)!.receivedAt - asked).to.be.below(1000);
      expect(target.received.at(-1)!.headers['x-service-delivery-attempt']).to.equal('2');
      expect(target.received.at(-1)!.json().id).to.equal(event.eventId);
      await waitFor(async () => (await deliveryOf(id, event.eventId)).state === 'succeeded', 'the delivery to succeed');
      expect(await trailActions(tenantId, 'admin.webhook.retry')).to.deep.equal(['admin.webhook.retry_delivery']);

      const again = await call(api(`${id}/deliveries/${deliveryId}/retry`), { key, method: 'POST' });
      expect(again.status).to.equal(409);
      expect(again.json.error).to.equal('already_delivered');
    });

    it('retries a failed delivery once: success resets consecutive_failures, failure is not counted twice', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver(503);
      const id = await register(key, target.url, ['phi.']);
      const event = newEvent({ tenantId });
      await seedEvents(db.url, [event]);
      await waitFor(async () => (await deliveryOf(id, event.eventId))?.attempts === 1, 'the first attempt');
      const { id: deliveryId } = await deliveryOf(id, event.eventId);
      const retry = () => call(api(`${id}/deliveries/${deliveryId}/retry`), { key, method: 'POST' });

      // The second attempt is the schedule's last: the delivery fails, and counts once.
      expect((await retry()).status).to.equal(202);
      await waitFor(async () => (await deliveryOf(id, event.eventId)).state === 'failed', 'the delivery to fail');
      expect(await consecutiveFailures(id)).to.equal(1);
      const failed = await call(api(`${id}/deliveries/${deliveryId}`), { key });
      expect(failed.json.delivery).to.include({ status: 'failed', attempts: 2, next_attempt_at: null });

      // A failed delivery retried and failing again does not count again.
      const retried = await retry();
      expect(retried.status).to.equal(202);
      expect(retried.json.delivery).to.include({ status: 'pending', attempts: 2 });
      await waitFor(async () => (await deliveryOf(id, event.eventId)).attempts === 3, 'the third attempt');
      expect((await deliveryOf(id, event.eventId)).state).to.equal('failed');
      expect(await consecutiveFailures(id)).to.equal(1);

      target.reply(204);
      expect((await retry()).status).to.equal(202);
      await waitFor(async () => (await deliveryOf(id, event.eventId)).state === 'succeeded', 'the retry to succeed');
      expect((await deliveryOf(id, event.eventId)).attempts).to.equal(4);
      expect(await consecutiveFailures(id)).to.equal(0);
      expect(target.received.map((delivery) => delivery.headers['x-service-delivery-attempt'])).to.deep.equal(['1', '2', '3', '4']);
      expect(await trailActions(tenantId, 'admin.webhook.retry')).to.have.length(3);
    });

    it('refuses a disabled endpoint with 409 endpoint_inactive, changing nothing', async () => {
      const { tenantId, key } = await freshTenant();
      const target = await receiver(503);
      const id = await register(key, target.url, ['phi.']);
      const event = newEvent({ tenantId });
      await seedEvents(db.url, [event]);
      await waitFor(async () => (await deliveryOf(id, event.eventId))?.attempts === 1, 'the first attempt');
      const { id: deliveryId } = await deliveryOf(id, event.eventId);
      expect((await call(api(`${id}/disable`), { key, method: 'POST' })).status).to.equal(200);
      const before = await snapshot(tenantId);
      const refused = await call(api(`${id}/deliveries/${deliveryId}/retry`), { key, method: 'POST' });
      expect(refused.status).to.equal(409);
      expect(refused.json.error).to.equal('endpoint_inactive');
      expect(await snapshot(tenantId)).to.equal(before);
      // A cancelled delivery is failed to clients.
      const log = await call(api(`${id}/deliveries?status=failed`), { key });
      expect(log.json.deliveries.map((delivery: any) => delivery.id)).to.deep.equal([deliveryId]);
      const replay = await call(api(`${id}/replay`), {
        key,
        body: { since: new Date(Date.now() - DAY_MS).toISOString(), until: new Date().toISOString() },
      });
      expect(replay.status).to.equal(409);
      expect(replay.json.error).to.equal('endpoint_inactive');
    });
  });

  describe('replay', () => {
    async function waitForReplay(key: string, endpointId: string, replayId: string): Promise<any> {
      let replay: any;
      await waitFor(
        async () => {
          replay = (await call(api(`${endpointId}/replays/${replayId}`), { key })).json.replay;
          return replay.status !== 'running';
        },
        'the replay to complete',
        20_000,
      );
      return replay;
    }

    it('delivers the matching events of the range, older than the endpoint included, skipping exactly the succeeded ones', async () => {
      const { tenantId, key } = await freshTenant();
      const start = Date.now() - 10 * DAY_MS;
      const old = Array.from({ length: 5 }, (_, index) => newEvent({ tenantId, action: 'phi.read', occurredAtMs: start + index * 1000 }));
      const outside = newEvent({ tenantId, action: 'phi.read', occurredAtMs: start - 1000 });
      const unmatched = newEvent({ tenantId, action: 'billing.read', occurredAtMs: start + 10_000 });
      const otherTenant = newEvent({ tenantId: `${tenantId}-other`, action: 'phi.read', occurredAtMs: start + 20_000 });
      await seedEvents(db.url, [...old, outside, unmatched, otherTenant]);

      const failing = new Set<string>();
      const target = await receiver(204);
      target.reply((delivery) => (failing.has(delivery.json().id) ? 503 : 204));
      const id = await register(key, target.url, ['phi.']);
      const live = Array.from({ length: 6 }, () => newEvent({ tenantId, action: 'phi.write' }));
      for (const event of live.slice(0, 2)) failing.add(event.eventId);
      await seedEvents(db.url, live);
      await waitFor(
        async () =>
          (await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1 AND attempts = 1`, [id])).rows[0].n === 6,
        'live attempts',
      );
      failing.clear();
      const received = target.received.length;
      // Allowed on an endpoint a Kubernetes resource manages, like a retry.
      await db.pool.query(`UPDATE webhook_endpoints SET managed_by = 'team-a/siem' WHERE id = $1`, [id]);

      const since = new Date(start).toISOString();
      const until = new Date(Date.now() + 1000).toISOString();
      const started = await call(api(`${id}/replay`), { key, body: { since, until, only_undelivered: true } });
      expect(started.status, started.text).to.equal(202);
      replayEnvelopeSchema.parse(started.json);
      expect(started.json.replay).to.include({
        status: 'running',
        since,
        until,
        only_undelivered: true,
        events_matched: 0,
        deliveries_created: 0,
        completed_at: null,
      });
      expect(started.json.replay.id).to.match(/^rpl_[0-9a-f]{32}$/);
      expect(started.headers.get('location')).to.equal(`/api/v2/public/audit/webhooks/${id}/replays/${started.json.replay.id}`);
      const done = await waitForReplay(key, id, started.json.replay.id);
      // 5 old + 6 live match; the 4 live ones delivered are skipped.
      expect(done).to.include({ status: 'completed', events_matched: 11, deliveries_created: 7 });
      expect(Date.parse(done.completed_at)).to.be.closeTo(Date.now(), 30_000);
      await waitFor(() => target.received.length === received + 7, 'the replayed deliveries');
      const replayed = target.received
        .slice(received)
        .map((delivery) => delivery.json().id)
        .sort();
      expect(replayed).to.deep.equal([...old.map((event) => event.eventId), live[0]!.eventId, live[1]!.eventId].sort());
      expect(await trailActions(tenantId, 'admin.webhook.replay')).to.deep.equal(['admin.webhook.replay']);

      // Same body bytes as live: the replayed copy of a live event is the live body, up to nothing.
      const liveBody = target.received.slice(0, received).find((delivery) => delivery.json().id === live[0]!.eventId)!.rawBody;
      const replayBody = target.received.slice(received).find((delivery) => delivery.json().id === live[0]!.eventId)!.rawBody;
      expect(replayBody.equals(liveBody)).to.equal(true);

      // Without only_undelivered every matching event is delivered again.
      const everything = await call(api(`${id}/replay`), { key, body: { since, until, only_undelivered: false } });
      expect(everything.status).to.equal(202);
      expect(await waitForReplay(key, id, everything.json.replay.id)).to.include({ events_matched: 11, deliveries_created: 11 });
    });

    it('allows one running replay per endpoint and a range of at most 90 days; refuses bad input changing nothing', async () => {
      const { tenantId, key } = await freshTenant();
      const now = Date.now();
      // Older than the endpoint: only the replay delivers them.
      await seedEvents(
        db.url,
        Array.from({ length: 1500 }, (_, index) => newEvent({ tenantId, occurredAtMs: now - DAY_MS + index })),
      );
      const target = await receiver(204);
      const id = await register(key, target.url, ['phi.']);
      const iso = (ms: number) => new Date(ms).toISOString();
      const cases: Array<[unknown, string]> = [
        [{ since: iso(now - 91 * DAY_MS), until: iso(now) }, 'until'],
        [{ since: iso(now - DAY_MS), until: iso(now - DAY_MS) }, 'since'],
        [{ since: iso(now - DAY_MS), until: iso(now - 2 * DAY_MS) }, 'since'],
        [{ since: 'yesterday', until: iso(now) }, 'since'],
        [{ since: iso(now - DAY_MS) }, 'until'],
        [{ since: iso(now - DAY_MS), until: iso(now + DAY_MS) }, 'until'],
        [{ since: iso(now - DAY_MS), until: iso(now), only_undelivered: 'yes' }, 'only_undelivered'],
        [{ since: iso(now - DAY_MS), until: iso(now), speed: 'fast' }, ''],
      ];
      const before = await snapshot(tenantId);
      for (const [body, field] of cases) {
        const refused = await call(api(`${id}/replay`), { key, body });
        expect(refused.status, JSON.stringify(body)).to.equal(422);
        expect(refused.json.error).to.equal('validation_failed');
        if (field)
          expect(
            refused.json.details.map((detail: any) => detail.field),
            JSON.stringify(body),
          ).to.include(field);
      }
      expect((await call(api(`${id}/replay`), { key, body: '{not json' })).status).to.equal(400);
      expect((await call(api(`${id}/replay?x=1`), { key, body: { since: iso(now - DAY_MS), until: iso(now) } })).status).to.equal(422);
      expect(await snapshot(tenantId)).to.equal(before);

      // Exactly 90 days is allowed. The receiver never answers, so the replay stops at its endpoint's cap
      // of pending deliveries and stays running.
      target.reply('hang');
      const first = await call(api(`${id}/replay`), { key, body: { since: iso(now - 90 * DAY_MS), until: iso(now) } });
      expect(first.status, first.text).to.equal(202);
      const progress = () => call(api(`${id}/replays/${first.json.replay.id}`), { key }).then((response) => response.json.replay);
      await waitFor(async () => (await progress()).deliveries_created >= 100, 'the first chunks');
      const second = await call(api(`${id}/replay`), { key, body: { since: iso(now - DAY_MS), until: iso(now) } });
      expect(second.status).to.equal(409);
      expect(second.json.error).to.equal('replay_running');
      // Held at its cap of pending deliveries (at most 1,000) while the receiver does not answer.
      const held = await progress();
      expect(held.status).to.equal('running');
      expect(held.deliveries_created).to.equal(held.events_matched).and.to.be.at.most(1000);
      // Beyond its slots the hung endpoint's deliveries are parked: to clients they are pending, and a retry
      // releases one.
      await waitFor(
        async () =>
          (await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1 AND state = 'parked'`, [id])).rows[0].n >
          0,
        'parked deliveries',
      );
      const { rows: parked } = await db.pool.query(
        `SELECT 'dlv_' || id AS id FROM deliveries WHERE endpoint_id = $1 AND state = 'parked' LIMIT 1`,
        [id],
      );
      const shown = await call(api(`${id}/deliveries/${parked[0].id}`), { key });
      expect(shown.json.delivery.status).to.equal('pending');
      const pendingIds = [];
      for (let cursor: string | null = null, first = true; first || cursor; first = false) {
        const page: any = await call(
          api(`${id}/deliveries?status=pending&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
          { key },
        );
        pendingIds.push(...page.json.deliveries.map((delivery: any) => delivery.id));
        cursor = page.json.page.next_cursor;
      }
      expect(pendingIds).to.include(parked[0].id);
      expect(pendingIds).to.have.length((await progress()).deliveries_created);
      const publications = async () =>
        (await db.pool.query(`SELECT publications FROM deliveries WHERE id = $1`, [parked[0].id.slice(4)])).rows[0].publications;
      const publishedBefore = await publications();
      expect((await call(api(`${id}/deliveries/${parked[0].id}/retry`), { key, method: 'POST' })).status).to.equal(202);
      // Released: the relay publishes it again (the worker may park it anew: its endpoint still hangs).
      // Within a second or two, long before the hung requests time out (10 s) and release parked ones themselves.
      await waitFor(async () => (await publications()) > publishedBefore, 'the parked delivery to be published again', 2_000);
      // Disabling the endpoint cancels the replay with its deliveries.
      expect((await call(api(`${id}/disable`), { key, method: 'POST' })).status).to.equal(200);
      await waitFor(async () => (await progress()).status === 'cancelled', 'the replay to be cancelled');
      expect((await progress()).completed_at).to.be.a('string');
      expect(await trailActions(tenantId, 'admin.webhook.replay')).to.have.length(1);
      expect((await call(api(`${id}/replays/rpl_${'0'.repeat(32)}`), { key })).status).to.equal(404);
      expect((await call(api(`${id}/replays/nope`), { key })).status).to.equal(404);
    });
  });

  describe('tenant isolation and scopes', () => {
    it("answers 403 for another tenant's endpoint and 404 for an unknown one on every path, changing nothing", async () => {
      const owner = await freshTenant();
      const target = await receiver(503);
      const id = await register(owner.key, target.url, ['phi.']);
      const event = newEvent({ tenantId: owner.tenantId });
      await seedEvents(db.url, [event]);
      await waitFor(async () => (await deliveryOf(id, event.eventId))?.attempts === 1, 'the first attempt');
      const { id: deliveryId } = await deliveryOf(id, event.eventId);
      const started = await call(api(`${id}/replay`), {
        key: owner.key,
        body: { since: new Date(Date.now() - DAY_MS).toISOString(), until: new Date().toISOString() },
      });
      const replayId = started.json.replay.id;
      // Everything the replay set off has happened (its delivery's first attempt too), so the owner's rows are still.
      await waitFor(
        async () => (await call(api(`${id}/replays/${replayId}`), { key: owner.key })).json.replay.status === 'completed',
        'the replay',
      );
      await waitFor(
        async () =>
          (await db.pool.query(`SELECT bool_and(attempts = 1) AS done FROM deliveries WHERE endpoint_id = $1`, [id])).rows[0].done === true,
        'every first attempt',
      );

      const intruder = await freshTenant();
      const reader = await freshTenant(['audit:read']);
      const writer = await freshTenant(['webhooks:write']);
      const unknown = `wh_${'0'.repeat(32)}`;
      const body = { since: new Date(Date.now() - DAY_MS).toISOString(), until: new Date().toISOString() };
      const paths: Array<{ method: string; path: (endpoint: string) => string; scope: string; body?: unknown }> = [
        { method: 'GET', path: (endpoint) => `${endpoint}/deliveries`, scope: 'audit:read' },
        { method: 'GET', path: (endpoint) => `${endpoint}/deliveries/${deliveryId}`, scope: 'audit:read' },
        { method: 'POST', path: (endpoint) => `${endpoint}/deliveries/${deliveryId}/retry`, scope: 'webhooks:write' },
        { method: 'POST', path: (endpoint) => `${endpoint}/replay`, scope: 'webhooks:write', body },
        { method: 'GET', path: (endpoint) => `${endpoint}/replays/${replayId}`, scope: 'audit:read' },
      ];
      const before = await snapshot(owner.tenantId);
      for (const { method, path, scope, body: requestBody } of paths) {
        const foreign = await call(api(path(id)), { key: intruder.key, method, body: requestBody });
        expect(foreign.status, `${method} ${path(id)}`).to.equal(403);
        expect(foreign.json.error).to.equal('forbidden');
        for (const missing of [unknown, 'wh_nope']) {
          const absent = await call(api(path(missing)), { key: intruder.key, method, body: requestBody });
          expect(absent.status, `${method} ${path(missing)}`).to.equal(404);
          expect(absent.json.error).to.equal('not_found');
        }
        const lacking = scope === 'audit:read' ? writer.key : reader.key;
        const unscoped = await call(api(path(id)), { key: lacking, method, body: requestBody });
        expect(unscoped.status).to.equal(403);
        expect(unscoped.json).to.include({ error: 'forbidden', required_scope: scope });
        expect((await call(api(path(id)), { method, body: requestBody })).status).to.equal(401);
      }
      expect(await snapshot(owner.tenantId)).to.equal(before);
      expect(await trailActions(intruder.tenantId, 'admin.webhook.')).to.deep.equal([]);
    });
  });

  describe('the TypeScript client', () => {
    it('walks the delivery log page by page, shows, retries and replays', async () => {
      const { tenantId, key } = await freshTenant();
      const client = new AuditTrailClient({ baseUrl: service.baseUrl, apiKey: key });
      const older = Array.from({ length: 3 }, (_, index) => newEvent({ tenantId, occurredAtMs: Date.now() - DAY_MS + index }));
      await seedEvents(db.url, older);
      const target = await receiver(503);
      const id = await register(key, target.url, ['phi.']);
      const live = Array.from({ length: 5 }, () => newEvent({ tenantId }));
      await seedEvents(db.url, live);
      await waitFor(() => target.received.length === 5, 'the first attempts');
      await waitFor(
        async () =>
          (await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1 AND attempts = 1`, [id])).rows[0].n === 5,
        'recorded',
      );

      const pages = [];
      for await (const page of client.listDeliveries(id, { status: 'pending', limit: 2 })) pages.push(page);
      expect(pages.map((page) => page.deliveries.length)).to.deep.equal([2, 2, 1]);
      const [newest] = pages[0]!.deliveries;
      expect(newest!.event_id).to.equal(live.at(-1)!.eventId);

      const detail = await client.getDelivery(id, newest!.id);
      expect(detail.attempts.map((attempt) => attempt.status_code)).to.deep.equal([503]);
      target.reply(204);
      expect((await client.retryDelivery(id, newest!.id)).status).to.equal('pending');
      await waitFor(async () => (await client.getDelivery(id, newest!.id)).delivery.status === 'succeeded', 'the retry');
      const again = await client.retryDelivery(id, newest!.id).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(again).to.be.instanceOf(AuditTrailApiError);
      expect((again as AuditTrailApiError).code).to.equal('already_delivered');

      const replay = await client.replay(id, { since: new Date(Date.now() - 2 * DAY_MS), until: new Date() });
      expect(replay.status).to.equal('running');
      await waitFor(async () => (await client.getReplay(id, replay.id)).status === 'completed', 'the replay');
      // The three older events and the four live ones not yet delivered.
      expect(await client.getReplay(id, replay.id)).to.include({ events_matched: 8, deliveries_created: 7 });
    });
  });
});
