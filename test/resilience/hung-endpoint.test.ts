import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { HUNG_CONCURRENCY as CONCURRENCY, HungEndpointBed, HUNG_TIMEOUT_MS as TIMEOUT_MS } from '../support/hungEndpointBed.ts';
import type { TestReceiver } from '../support/receiver.ts';
import type { TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * A receiver that accepts requests and never answers (issue 16, item 2), on Postgres and NATS servers of this
 * file's own. Its backlog must cost work per endpoint, not per delivery and second: its deliveries wait parked
 * in Postgres and come back only as its requests finish.
 */
describe('a hung webhook endpoint', function () {
  this.timeout(120_000);
  let bed: HungEndpointBed;

  before(async () => {
    bed = await HungEndpointBed.start();
  });

  afterEach(() => bed?.reset());

  after(() => bed?.remove());

  const deployment = (...args: Parameters<HungEndpointBed['deployment']>) => bed.deployment(...args);
  const startService = (...args: Parameters<HungEndpointBed['startService']>) => bed.startService(...args);

  /** Sums one series over the services. */
  async function metric(running: TestService[], series: string): Promise<number> {
    let total = 0;
    for (const service of running) total += await service.metric(series);
    return total;
  }

  /**
   * Waits until the backlog has been published once and has settled, then counts over a window: the hung
   * receiver's requests, and the publications, parkings and deferrals of the services.
   */
  async function steadyState(running: TestService[], hung: TestReceiver, backlog: number, windowMs: number) {
    // Every delivery is published once and reaches a worker, which holds what the endpoint's slots and a short
    // queue behind them take; what happens to the rest is what this test is about.
    await waitFor(
      async () => (await metric(running, 'audit_webhook_relay_published_total')) >= backlog,
      'the backlog to be published',
      30_000,
    );
    // The hung endpoint's slots have been through their time limit three times: a fourth round of its
    // requests (CONCURRENCY per worker) has arrived.
    await waitFor(() => hung.received.length >= 4 * CONCURRENCY * running.length, 'three rounds of timed-out requests', 30_000);
    // Settled: what the workers put aside (parked, or deferred by older code) has stopped growing. On a
    // loaded machine the first pass over the backlog can take longer than the pause above.
    const putAside = async () =>
      (await metric(running, 'audit_webhook_deliveries_parked_total')) + (await metric(running, 'audit_webhook_deliveries_deferred_total'));
    let previous = -Infinity;
    await waitFor(
      async () => {
        const now = await putAside();
        const settled = now - previous < backlog / 10;
        previous = now;
        return settled;
      },
      'the backlog to settle',
      30_000,
      1_000,
    );
    const counters = async () => ({
      published: await metric(running, 'audit_webhook_relay_published_total'),
      deferred: await metric(running, 'audit_webhook_deliveries_deferred_total'),
      parked: await metric(running, 'audit_webhook_deliveries_parked_total'),
      attempts: hung.received.length,
      at: Date.now(),
    });
    const before = await counters();
    // A window of time is what is measured here (rates over it), not a wait for something to happen.
    await sleep(windowMs);
    const after = await counters();
    const window = {
      seconds: (after.at - before.at) / 1000,
      attempts: after.attempts - before.attempts,
      published: after.published - before.published,
      parked: after.parked - before.parked,
      deferred: after.deferred - before.deferred,
    };
    return { ...window, figures: JSON.stringify(window) };
  }

  /** Five events of tenant `healthy`, one at a time: each must reach its (healthy) receiver within a second. */
  async function expectPromptDeliveries(db: TestDatabase, receiver: TestReceiver): Promise<void> {
    const latencies: number[] = [];
    const seen = receiver.received.length;
    for (let round = 1; round <= 5; round += 1) {
      const written = Date.now();
      await seedEvents(db.url, [newEvent({ tenantId: 'healthy' })]);
      await waitFor(() => receiver.received.length === seen + round, 'the healthy delivery', 5_000, 5);
      latencies.push(receiver.received[seen + round - 1]!.receivedAt - written);
    }
    expect(Math.max(...latencies), `latencies ${latencies.join(', ')} ms`).to.be.below(1_000);
  }

  async function states(db: TestDatabase, endpointId: string): Promise<Record<string, number>> {
    const { rows } = await db.pool.query(
      `SELECT state || CASE WHEN state = 'pending' AND attempts = 0 THEN '_unattempted' ELSE '' END AS state, count(*)::int AS n
       FROM deliveries WHERE endpoint_id = $1 GROUP BY 1`,
      [endpointId],
    );
    return Object.fromEntries(rows.map((row) => [row.state, row.n]));
  }

  it('parks its backlog: publications bounded by its concurrency, attempts at the pace of its slots, others on time, all sent once it answers', async () => {
    const BACKLOG = 3_000;
    const { db, endpoints } = await deployment([
      { tenantId: 'hung', reply: 'hang' },
      { tenantId: 'healthy', reply: 204 },
    ]);
    const [hung, healthy] = endpoints as [(typeof endpoints)[0], (typeof endpoints)[0]];
    const service = await startService(db);
    await seedEvents(
      db.url,
      Array.from({ length: BACKLOG }, () => newEvent({ tenantId: 'hung' })),
    );

    const {
      seconds,
      attempts,
      published,
      parked: parkings,
      deferred,
      figures,
    } = await steadyState([service], hung.receiver, BACKLOG, 6_000);
    // The pace its slots allow: CONCURRENCY requests, each held until the time limit.
    expect(attempts, figures).to.be.within(
      Math.floor(0.5 * CONCURRENCY * (seconds / (TIMEOUT_MS / 1000))),
      2 * CONCURRENCY * (seconds + 1),
    );
    // Work follows the requests that finish, not the 3,000 waiting: about one publication per attempt (plus
    // the relay's sweep, one per ack wait), where deferring cycled the whole backlog every few seconds.
    expect(published, figures).to.be.at.most(2 * attempts + 10);
    expect(parkings, figures).to.be.at.most(2 * attempts + 10);
    expect(deferred, figures).to.equal(0);

    // Parking counts no attempt: every attempt recorded is one the receiver saw (those on the wire are not recorded yet).
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS records FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1`,
      [hung.id],
    );
    expect(rows[0].records).to.be.within(hung.receiver.received.length - 2 * CONCURRENCY, hung.receiver.received.length);
    // All but what the worker holds is parked, unattempted.
    const { rows: parked } = await db.pool.query(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE attempts > 0)::int AS attempted FROM deliveries WHERE endpoint_id = $1 AND state = 'parked'`,
      [hung.id],
    );
    expect(parked[0].n).to.be.above(BACKLOG - hung.receiver.received.length - 10 * CONCURRENCY);
    expect(parked[0].attempted).to.equal(0);

    // Another endpoint's deliveries go out at once meanwhile.
    await expectPromptDeliveries(db, healthy.receiver);

    // The receiver answers again: the parked backlog is released as its answers come and every delivery not
    // yet attempted is sent (those that timed out wait for their retry, an hour away).
    hung.receiver.reply(204);
    await waitFor(
      async () => {
        const now = await states(db, hung.id);
        return now.parked === undefined && now.pending_unattempted === undefined;
      },
      'every parked delivery to be sent',
      60_000,
      200,
    );
    const final = await states(db, hung.id);
    expect(final.succeeded! + (final.pending ?? 0)).to.equal(BACKLOG);
    expect(await service.metric('audit_webhook_deliveries_unparked_total{by="request"}')).to.be.greaterThan(BACKLOG - 20 * CONCURRENCY);
  });

  it('parks its backlog with a request limit under a second too, and other endpoints keep getting theirs', async () => {
    const BACKLOG = 2_000;
    const { db, endpoints } = await deployment([
      { tenantId: 'hung', reply: 'hang' },
      { tenantId: 'healthy', reply: 204 },
    ]);
    const [hung, healthy] = endpoints as [(typeof endpoints)[0], (typeof endpoints)[0]];
    // One of its requests ends at the limit every 125 ms: only that none of them was answered shows that
    // the endpoint does not keep up.
    const service = await startService(db, { DELIVERY_TIMEOUT_MS: '500' });
    await seedEvents(
      db.url,
      Array.from({ length: BACKLOG }, () => newEvent({ tenantId: 'hung' })),
    );
    await waitFor(
      async () => (await service.metric('audit_webhook_relay_published_total')) >= BACKLOG,
      'the backlog to be published',
      30_000,
    );
    await waitFor(async () => ((await states(db, hung.id)).parked ?? 0) > BACKLOG / 2, 'most of the backlog to be parked', 20_000, 200);

    // The worker went on pulling: another endpoint's deliveries go out at once.
    await expectPromptDeliveries(db, healthy.receiver);
    expect(await service.metric('audit_webhook_deliveries_deferred_total')).to.equal(0);
  });

  it('keeps every worker sharing the outbox at its own concurrency, and loses nothing, with two relays and two workers', async () => {
    const BACKLOG = 2_000;
    const { db, endpoints } = await deployment([{ tenantId: 'shared', reply: 'hang' }]);
    const [hung] = endpoints as [(typeof endpoints)[0]];
    const first = await startService(db);
    const second = await startService(db, {}, first.busNamespace);
    await seedEvents(
      db.url,
      Array.from({ length: BACKLOG }, () => newEvent({ tenantId: 'shared' })),
    );

    const { seconds, attempts, published, deferred, figures } = await steadyState([first, second], hung.receiver, BACKLOG, 6_000);
    // Each worker has its own CONCURRENCY slots, and parked deliveries reach both.
    expect(attempts, figures).to.be.within(
      Math.floor(0.5 * 2 * CONCURRENCY * (seconds / (TIMEOUT_MS / 1000))),
      2 * 2 * CONCURRENCY * (seconds + 1),
    );
    expect(published, figures).to.be.at.most(2 * attempts + 10);
    expect(deferred, figures).to.equal(0);

    hung.receiver.reply(204);
    await waitFor(
      async () => {
        const now = await states(db, hung.id);
        return now.parked === undefined && now.pending_unattempted === undefined;
      },
      'every parked delivery to be sent',
      60_000,
      200,
    );
    const final = await states(db, hung.id);
    expect(final.succeeded! + (final.pending ?? 0)).to.equal(BACKLOG);
    // Every request the receiver saw is one recorded attempt (records are unique per delivery and attempt):
    // the two workers never made the same attempt twice. Requests on the wire are recorded once they end.
    await waitFor(async () => {
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS records FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1`,
        [hung.id],
      );
      return rows[0].records === hung.receiver.received.length;
    }, 'every request to be recorded as an attempt');
  });

  it('sends parked deliveries that nothing in flight would release, within about the ack wait', async () => {
    const { db, endpoints } = await deployment([{ tenantId: 'stranded', reply: 204 }]);
    const [endpoint] = endpoints as [(typeof endpoints)[0]];
    // Parked with nothing of their endpoint in flight: as after a rollback to a version that does not release
    // them, or a release that skipped them.
    await seedEvents(
      db.url,
      Array.from({ length: 50 }, () => newEvent({ tenantId: 'stranded' })),
    );
    await db.pool.query(`UPDATE deliveries SET state = 'parked' WHERE endpoint_id = $1`, [endpoint.id]);
    const service = await startService(db, { DELIVERY_ACK_WAIT_MS: '1000' });
    await waitFor(async () => (await states(db, endpoint.id)).succeeded === 50, 'the parked deliveries to be sent', 15_000);
    expect(endpoint.receiver.received).to.have.length(50);
    expect(await service.metric('audit_webhook_deliveries_unparked_total{by="sweep"}')).to.be.at.least(1);
  });
});
