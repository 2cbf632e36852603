import { expect } from 'chai';
import { LongReadYield, type LongReadYieldObserver } from '../../src/platform/longReadYield.ts';

/** Settles the microtask queue, so a resolved wait has run its callbacks. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

/** Whether a wait has ended, readable at any moment. */
function watch(wait: Promise<void> | undefined): { ended(): boolean; promise: Promise<void> } {
  let ended = wait === undefined;
  const promise = (wait ?? Promise.resolve()).then(() => {
    ended = true;
  });
  return { ended: () => ended, promise };
}

describe('LongReadYield', () => {
  // A clock the test moves: a long read earns its share of waiting by running, here by the clock's moves.
  let clock = 0;
  const now = () => clock;
  const counts = { yielding: 0, yields: 0, declined: 0 };
  const observer: LongReadYieldObserver = {
    yielding: (delta) => (counts.yielding += delta),
    yielded: () => (counts.yields += 1),
    declined: () => (counts.declined += 1),
  };
  const gate = (maxWaitMs = 60_000, maxShare = 0.5) => new LongReadYield({ maxWaitMs, maxShare }, observer, now);

  beforeEach(() => {
    clock = 0;
    Object.assign(counts, { yielding: 0, yields: 0, declined: 0 });
  });

  it('lets a long read go on at once when no short request is in flight', () => {
    const turns = gate().longRead();
    clock = 1_000;
    expect(turns.turn()).to.equal(undefined);
    const end = gate().shortRequest();
    end();
    expect(counts).to.deep.equal({ yielding: 0, yields: 0, declined: 0 });
  });

  it('holds a long read until the short requests in flight have all ended', async () => {
    const yielding = gate();
    const turns = yielding.longRead();
    const [endFirst, endSecond] = [yielding.shortRequest(), yielding.shortRequest()];
    clock = 1_000;
    const wait = watch(turns.turn());
    expect(counts.yielding).to.equal(1);
    endSecond();
    await settled();
    expect(wait.ended(), 'ended while the first request was in flight').to.equal(false);
    endFirst();
    await wait.promise;
    expect(counts).to.deep.equal({ yielding: 0, yields: 1, declined: 0 });
  });

  it('does not wait for short requests that began after it did', async () => {
    const yielding = gate();
    const turns = yielding.longRead();
    const endEarlier = yielding.shortRequest();
    clock = 1_000;
    const wait = watch(turns.turn());
    const endLater = yielding.shortRequest();
    endEarlier();
    await wait.promise;
    expect(yielding.shortRequestsInFlight()).to.equal(1);
    endLater();
  });

  it('counts a short request once, however often it is ended', async () => {
    const yielding = gate();
    const turns = yielding.longRead();
    const endFirst = yielding.shortRequest();
    const endSecond = yielding.shortRequest();
    endFirst();
    endFirst();
    expect(yielding.shortRequestsInFlight()).to.equal(1);
    clock = 1_000;
    const wait = watch(turns.turn());
    await settled();
    expect(wait.ended()).to.equal(false);
    endSecond();
    await wait.promise;
  });

  it('waits no longer than maxWaitMs, even while the short request goes on', async () => {
    const yielding = gate(5);
    const turns = yielding.longRead();
    const end = yielding.shortRequest();
    clock = 1_000;
    await turns.turn();
    expect(yielding.shortRequestsInFlight()).to.equal(1);
    expect(counts.yields).to.equal(1);
    end();
  });

  it('waits at most its share of the time it has run, and then goes on beside short requests', async () => {
    const yielding = gate(60_000, 0.5);
    const turns = yielding.longRead();
    const endFirst = yielding.shortRequest();
    // Nothing earned yet: a long read that has not run may not wait.
    expect(turns.turn()).to.equal(undefined);
    expect(counts.declined).to.equal(1);
    // 100 ms run: 50 ms of waiting earned, spent by the wait below (its request ends 50 ms later).
    clock = 100;
    const wait = watch(turns.turn());
    clock = 150;
    endFirst();
    await wait.promise;
    const endSecond = yielding.shortRequest();
    // At 150 ms, 75 ms earned and 50 spent: one more wait of at most 25 ms.
    const next = watch(turns.turn());
    clock = 200;
    endSecond();
    await next.promise;
    // At 200 ms, 100 ms earned and 100 spent: it goes on at once.
    const endThird = yielding.shortRequest();
    expect(turns.turn()).to.equal(undefined);
    expect(counts).to.deep.equal({ yielding: 0, yields: 2, declined: 2 });
    endThird();
  });

  it('never waits with maxWaitMs 0 (yielding turned off)', () => {
    const yielding = gate(0);
    const turns = yielding.longRead();
    const end = yielding.shortRequest();
    clock = 1_000;
    expect(turns.turn()).to.equal(undefined);
    end();
  });

  it('refuses a share that would let a long read wait for ever', () => {
    expect(() => new LongReadYield({ maxWaitMs: 100, maxShare: 1 })).to.throw(RangeError);
    expect(() => new LongReadYield({ maxWaitMs: -1, maxShare: 0.5 })).to.throw(RangeError);
  });
});
