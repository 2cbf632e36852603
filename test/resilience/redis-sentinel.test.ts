import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { PrivateRedisNode, PrivateSentinel } from '../support/private-sentinel.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const LIMIT = 10;

/**
 * Rate limits through a Redis Sentinel failover: a master and its replica of the test's own, a real
 * redis-sentinel watching them, and two api pods sharing the limits through whichever server Sentinel names.
 * Limits are shared before and after; in the gap the documented fail-open (each pod limits on its own,
 * docs/operations.md "How dependency trouble shows") answers 200 or 429, never an error and never slowly.
 */
describe('rate limits through a Redis Sentinel failover', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let first: PrivateRedisNode;
  let second: PrivateRedisNode;
  let sentinel: PrivateSentinel;
  let pods: TestService[];
  const prefix = `test:${randomBytes(4).toString('hex')}`;

  before(async () => {
    db = await createTestDatabase();
    first = await PrivateRedisNode.start();
    second = await PrivateRedisNode.start(first.port);
    await waitFor(
      async () => (await info(second.port, 'replication')).includes('master_link_status:up'),
      'the replica in sync',
      15_000,
      100,
    );
    sentinel = await PrivateSentinel.start('audit', first.port);
    await waitFor(async () => (await sentinelReplicas(sentinel.port, 'audit')) === 1, 'Sentinel to discover the replica', 15_000, 100);
    const env = {
      REDIS_SENTINELS: `127.0.0.1:${sentinel.port}`,
      REDIS_SENTINEL_NAME: 'audit',
      RATE_LIMIT_READ_PER_MINUTE: String(LIMIT),
      RATE_LIMIT_KEY_PREFIX: prefix,
    };
    pods = [
      await startTestService({ databaseUrl: db.url, roles: ['api'], env }),
      await startTestService({ databaseUrl: db.url, roles: ['api'], env }),
    ];
  });

  after(async () => {
    for (const pod of pods ?? []) await pod.stop();
    await sentinel?.remove();
    await second?.remove();
    await first?.remove();
    await db?.drop();
  });

  const freshKey = () => mintKey(db.url, { tenantId: 'sentinel', scopes: ['audit:read'] }).then((minted) => minted.key);
  const read = (pod: TestService, key: string) => call(`${pod.baseUrl}/audit/events?limit=1`, { key });

  /** LIMIT reads spread over both pods are served and the next is refused: the pods share one count. */
  async function sharedLimitHolds(key: string): Promise<void> {
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT; i += 1) statuses.push((await read(pods[i % 2]!, key)).status);
    expect(statuses).to.deep.equal(Array(LIMIT).fill(200));
    expect((await read(pods[0]!, key)).status).to.equal(429);
    expect((await read(pods[1]!, key)).status).to.equal(429);
  }

  /** Reads until Sentinel names a new master and both pods are back on shared limits; each answer checked. */
  async function readThroughFailover(oldMasterPort: number, trigger: () => Promise<void>): Promise<number> {
    const key = await freshKey();
    const answers: { status: number; ms: number }[] = [];
    let promoted: number | undefined;
    const promotion = sentinel.waitForNewMaster(oldMasterPort).then((port) => (promoted = port));
    await trigger();
    const deadline = Date.now() + 45_000;
    for (;;) {
      for (const pod of pods) {
        const started = Date.now();
        const { status } = await read(pod, key);
        answers.push({ status, ms: Date.now() - started });
      }
      const settled =
        promoted !== undefined &&
        (await serviceConnections(promoted)) >= pods.length &&
        (await Promise.all(pods.map((pod) => pod.metric('audit_rate_limiter_fallback_active')))).every((value) => value === 0);
      if (settled || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await promotion;
    expect(answers.filter((answer) => answer.status !== 200 && answer.status !== 429)).to.deep.equal([]);
    expect(Math.max(...answers.map((answer) => answer.ms))).to.be.below(3_000);
    return promoted!;
  }

  it('holds the limits across a planned switchover (SENTINEL FAILOVER), the old master demoted under the pods', async () => {
    const before = await freshKey();
    await sharedLimitHolds(before);
    await replicated(first.port);

    const promoted = await readThroughFailover(first.port, () => sentinel.failover());
    expect(promoted).to.equal(second.port);

    // The count of the key used up before the switchover came across with the replica: still refused.
    expect((await read(pods[0]!, before)).status).to.equal(429);
    expect((await read(pods[1]!, before)).status).to.equal(429);
    // And a key used after it is counted once, on the new master.
    const after = await freshKey();
    await sharedLimitHolds(after);
    expect(await countersOn(second.port, prefix)).to.be.greaterThan(0);
  });

  it('holds the limits across the death of the master (SIGKILL), failing open per pod only in the gap', async () => {
    // The demoted server follows the new master by now (Sentinel reconfigured it).
    await waitFor(
      async () => (await info(first.port, 'replication')).includes('master_link_status:up'),
      'the old master to follow',
      20_000,
      100,
    );
    const before = await freshKey();
    await sharedLimitHolds(before);
    await replicated(second.port);

    const promoted = await readThroughFailover(second.port, () => second.stop('crash'));
    expect(promoted).to.equal(first.port);

    expect((await read(pods[0]!, before)).status).to.equal(429);
    expect((await read(pods[1]!, before)).status).to.equal(429);
    await sharedLimitHolds(await freshKey());
  });
});

async function withRedis<T>(port: number, fn: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await fn(client);
  } finally {
    client.disconnect();
  }
}

function info(port: number, section: string): Promise<string> {
  return withRedis(port, (client) => client.info(section)).catch(() => '');
}

function sentinelReplicas(port: number, name: string): Promise<number> {
  return withRedis(port, async (client) => ((await client.call('SENTINEL', 'replicas', name)) as unknown[]).length).catch(() => 0);
}

/** Until the master's writes so far have reached its replica (WAIT), so a failover now loses none of them. */
async function replicated(masterPort: number): Promise<void> {
  const acknowledged = await withRedis(masterPort, (client) => client.call('WAIT', '1', '5000'));
  expect(acknowledged).to.equal(1);
}

/** The service's connections (named audit-trail) to the server on `port`. */
function serviceConnections(port: number): Promise<number> {
  return withRedis(port, async (client) => (await client.client('LIST')) as string)
    .then((list) => list.split('\n').filter((line) => / name=audit-trail /.test(line)).length)
    .catch(() => 0);
}

function countersOn(port: number, prefix: string): Promise<number> {
  return withRedis(port, async (client) => (await client.keys(`${prefix}*`)).length);
}
