import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { PrivateRedis } from '../support/private-services.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { RoleProcesses } from '../support/roleProcesses.ts';
import { TEST_ENCRYPTION_KEY, call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const DELIVERY_ENV = {
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  DELIVERY_SCHEDULE: '200ms,200ms,200ms,200ms',
  DELIVERY_RELAY_POLL_MS: '50',
  // A killed worker's messages come back to another after this long.
  DELIVERY_ACK_WAIT_MS: '2000',
};

/** The most arrivals in any window of `windowMs`. */
function mostInWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  return Math.max(...sorted.map((start) => sorted.filter((time) => time >= start && time < start + windowMs).length));
}

/**
 * Ordered delivery and rate limits with workers in processes of their own: one killed in the middle of an
 * ordered endpoint's delivery, two sharing an endpoint's rate through Redis, and the same two while Redis is
 * down (docs/webhooks.md "Delivery settings").
 */
describe('ordered and rate-limited endpoints across worker processes', function () {
  this.timeout(90_000);
  let redis: PrivateRedis;
  let db: TestDatabase;
  let api: TestService;
  let key: string;
  const receivers: TestReceiver[] = [];
  const roles = new RoleProcesses();

  before(async () => {
    redis = await PrivateRedis.start();
    db = await createTestDatabase();
    // The api and the relay run here; workers run as child processes that can be killed.
    api = await startTestService({ databaseUrl: db.url, roles: ['api', 'relay'], env: DELIVERY_ENV });
    ({ key } = await mintKey(db.url, { tenantId: 'lanes', scopes: ['webhooks:write', 'audit:read'] }));
  });

  after(async () => {
    roles.killAll();
    await api?.stop();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await db?.drop();
    await redis?.remove();
  });

  function startWorker(): Promise<ChildProcess> {
    return roles.start(['worker'], {
      ...DELIVERY_ENV,
      DATABASE_URL: db.url,
      NATS_NAMESPACE: api.busNamespace,
      REDIS_URL: redis.url,
      SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    });
  }

  async function register(body: Record<string, unknown>): Promise<string> {
    const target = await startReceiver(204);
    receivers.push(target);
    const response = await call(`${api.baseUrl}/audit/webhooks`, { key, body: { url: target.url, ...body } });
    expect(response.status, response.text).to.equal(201);
    return response.json.endpoint.id;
  }

  async function succeeded(endpointId: string): Promise<number> {
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1 AND state = 'succeeded'`, [
      endpointId,
    ]);
    return rows[0].n;
  }

  const metric = async (worker: ChildProcess, series: string) => {
    const text = await (await fetch(`${roles.internalUrl(worker)}/metrics`)).text();
    const line = text.split('\n').find((entry) => entry.startsWith(`${series} `));
    return line ? Number(line.split(' ')[1]) : 0;
  };

  it('keeps an ordered endpoint in order when the worker is killed in the middle of a delivery: nothing after it goes until it is made', async () => {
    const id = await register({ event_filter: ['order.'], ordered: true });
    const target = receivers.at(-1)!;
    const events = Array.from({ length: 6 }, (_, index) =>
      newEvent({ tenantId: 'lanes', action: 'order.step', occurredAtMs: Date.now() + index }),
    );
    // The third delivery hangs until its worker is dead; the others, and its redelivery, are answered.
    let hung = false;
    target.reply((delivery) => {
      if (delivery.json().id !== events[2]!.eventId || hung) return 204;
      hung = true;
      return 'hang';
    });
    const first = await startWorker();
    for (const event of events) await seedEvents(db.url, [event]);
    await waitFor(() => hung, 'the third delivery on the wire');
    // Nothing behind it may start while it is on the wire.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(target.received.map((delivery) => delivery.json().id)).to.deep.equal(events.slice(0, 3).map((event) => event.eventId));
    await roles.kill(first);

    await startWorker();
    await waitFor(async () => (await succeeded(id)) === 6, 'every delivery, in turn', 30_000);
    const arrived = target.received.map((delivery) => delivery.json().id);
    // The third arrived twice (its first attempt died with the worker), and the fourth only after its second.
    expect(arrived).to.deep.equal([...events.slice(0, 3), ...events.slice(2)].map((event) => event.eventId));
  });

  it('shares an endpoint rate limit between two workers through Redis: 5 a second in all, not 5 each', async () => {
    const id = await register({ event_filter: ['rate.'], rate_limit_per_s: 5 });
    const target = receivers.at(-1)!;
    for (const earlier of roles.running()) await roles.kill(earlier);
    const workers = await Promise.all([startWorker(), startWorker()]);
    // Written one at a time, so their messages spread over both workers.
    for (let index = 0; index < 25; index += 1) {
      await seedEvents(db.url, [newEvent({ tenantId: 'lanes', action: 'rate.check' })]);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await waitFor(async () => (await succeeded(id)) === 25, 'every delivery', 30_000);
    const times = target.received.map((delivery) => delivery.receivedAt);
    // Paced at 5 a second with a burst of 1 (6 starts at most in a second; one more for the way to the receiver
    // on a loaded machine); two workers at 5 each would have taken about 2.4 s, this takes 4.8 s.
    expect(mostInWindow(times, 1_000)).to.be.at.most(7);
    expect(Math.max(...times) - Math.min(...times)).to.be.at.least(4_000);
    const attempts = await Promise.all(workers.map((worker) => metric(worker, 'audit_webhook_delivery_attempts_total{result="success"}')));
    expect(attempts.reduce((sum, count) => sum + count, 0)).to.be.at.least(25);
    expect(Math.min(...attempts), `attempts per worker: ${attempts}`).to.be.above(0);
  });

  it('goes on delivering while Redis is down, each worker enforcing the limit on its own, and shares it again once Redis is back', async () => {
    const id = await register({ event_filter: ['outage.'], rate_limit_per_s: 5 });
    const target = receivers.at(-1)!;
    const workers = roles.running();
    await redis.stop();
    for (let index = 0; index < 12; index += 1) {
      await seedEvents(db.url, [newEvent({ tenantId: 'lanes', action: 'outage.check' })]);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await waitFor(async () => (await succeeded(id)) === 12, 'every delivery without Redis', 30_000);
    // Each worker at 5 a second (and its burst), so at most twice that at the receiver.
    expect(
      mostInWindow(
        target.received.map((delivery) => delivery.receivedAt),
        1_000,
      ),
    ).to.be.at.most(13);
    const fallback = await Promise.all(workers.map((worker) => metric(worker, 'audit_webhook_rate_limit_fallback_active')));
    expect(fallback).to.include(1);

    await redis.start();
    // Each delivery after Redis is back asks it for a permit; the worker that took one shares the limit again.
    const fellBack = workers.filter((_, index) => fallback[index] === 1);
    await waitFor(
      async () => {
        await seedEvents(db.url, [newEvent({ tenantId: 'lanes', action: 'outage.check' })]);
        return (await Promise.all(fellBack.map((worker) => metric(worker, 'audit_webhook_rate_limit_fallback_active')))).includes(0);
      },
      'a worker back on the shared limit',
      20_000,
      500,
    );
  });
});
