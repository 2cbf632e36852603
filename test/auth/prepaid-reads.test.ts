import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { PrepaidReads } from '../../src/auth/prepaidReads.ts';
import { KeyRateLimiter } from '../../src/auth/rateLimiter.ts';
import { ManualClock } from '../support/manual-clock.ts';
import { testLogger } from '../support/service.ts';

/**
 * Tile reads paid for in blocks of a key's read budget (auth/prepaidReads.ts), against the shared Redis: the
 * budget is never exceeded, across instances too; a block costs one round trip; points are not spent after
 * the window they were bought in; a refusal is the limiter's.
 */
describe('reads paid for in blocks', () => {
  let redis: Redis;

  before(async () => {
    redis = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });

  after(() => redis?.disconnect());

  /** A limiter of its own budget namespace, counting its round trips to Redis. */
  const limiterWith = (read: number, keyPrefix = `test:prepaid:${randomBytes(4).toString('hex')}`) => {
    const limiter = new KeyRateLimiter({ redis, limits: { read, write: 10, auth: 10 }, log: testLogger(), keyPrefix });
    const counted = { limiter, purchases: 0, keyPrefix };
    const consume = limiter.consume.bind(limiter);
    limiter.consume = (...args) => {
      counted.purchases += 1;
      return consume(...args);
    };
    return counted;
  };
  const allowedOf = async (reads: Array<() => Promise<{ allowed: boolean }>>) => {
    let allowed = 0;
    for (const read of reads) if ((await read()).allowed) allowed += 1;
    return allowed;
  };

  it('buys a block of points in one round trip and spends it locally, reporting what is left of the budget', async () => {
    const counted = limiterWith(1000);
    const reads = new PrepaidReads(counted.limiter, { block: 16 });
    const decisions = [];
    for (let read = 0; read < 64; read += 1) decisions.push(await reads.consume('key-a'));
    expect(decisions.every((decision) => decision.allowed)).to.equal(true);
    expect(counted.purchases).to.equal(4);
    expect(decisions.map((decision) => decision.remaining).slice(0, 3)).to.deep.equal([999, 998, 997]);
    expect(decisions.at(-1)!.remaining).to.equal(936);
  });

  it('never serves more reads than the budget, with two instances buying from it at once', async () => {
    const first = limiterWith(40);
    const second = limiterWith(40, first.keyPrefix);
    const [a, b] = [new PrepaidReads(first.limiter, { block: 16 }), new PrepaidReads(second.limiter, { block: 16 })];
    const reads = Array.from({ length: 100 }, (_, read) => () => (read % 2 === 0 ? a : b).consume('key-b'));
    const allowed = await allowedOf(reads);
    // At most the budget; at worst what one instance held unspent short of it.
    expect(allowed).to.be.at.most(40);
    expect(allowed).to.be.at.least(40 - 15);
  });

  it('serves concurrent reads of one key from one purchase', async () => {
    const counted = limiterWith(1000);
    const reads = new PrepaidReads(counted.limiter, { block: 16 });
    const decisions = await Promise.all(Array.from({ length: 16 }, () => reads.consume('key-c')));
    expect(decisions.every((decision) => decision.allowed)).to.equal(true);
    expect(counted.purchases).to.equal(1);
  });

  it('does not spend points after the window they were bought in ends', async () => {
    const counted = limiterWith(1000);
    const clock = new ManualClock();
    const reads = new PrepaidReads(counted.limiter, { block: 16, clock });
    await reads.consume('key-d');
    await reads.consume('key-d');
    expect(counted.purchases).to.equal(1);
    await clock.advance(60_000);
    await reads.consume('key-d');
    expect(counted.purchases).to.equal(2);
  });

  it('refuses a read as the limiter does once the budget is spent, buying no more than the budget holds', async () => {
    const counted = limiterWith(5);
    const reads = new PrepaidReads(counted.limiter, { block: 16 });
    const decisions = [];
    for (let read = 0; read < 6; read += 1) decisions.push(await reads.consume('key-e'));
    expect(decisions.map((decision) => decision.allowed)).to.deep.equal([true, true, true, true, true, false]);
    const refused = decisions.at(-1)!;
    expect(refused.limit).to.equal(5);
    expect(refused.remaining).to.equal(0);
    expect(refused.resetSeconds).to.be.within(1, 60);
  });
});
