import { expect } from 'chai';
import { WorkQueue } from '../../src/controller/workQueue.ts';
import { ManualClock } from '../support/manual-clock.ts';

/** The key a get() has resolved with by now, or 'waiting': the queue hands keys out synchronously, so no timer is needed. */
const handedOut = (next: Promise<string | undefined>) => Promise.race([next, Promise.resolve('waiting')]);

describe('WorkQueue', () => {
  it('queues a key once however often it is added while waiting, in first-added order', async () => {
    const queue = new WorkQueue();
    for (const key of ['a', 'b', 'a', 'c', 'b']) queue.add(key);
    expect(queue.length).to.equal(3);
    expect([await queue.get(), await queue.get(), await queue.get()]).to.deep.equal(['a', 'b', 'c']);
  });

  it('never hands the same key to two workers: added while processing, it comes back only after done()', async () => {
    const queue = new WorkQueue();
    queue.add('a');
    const first = await queue.get();
    queue.add('a');
    queue.add('a');
    expect(queue.length).to.equal(0);
    const second = queue.get();
    expect(await handedOut(second)).to.equal('waiting');
    queue.done(first!);
    expect(await handedOut(second)).to.equal('a');
    queue.done('a');
    expect(queue.length).to.equal(0);
  });

  it('wakes a waiting worker when a key arrives', async () => {
    const queue = new WorkQueue();
    const waiting = queue.get();
    queue.add('x');
    expect(await waiting).to.equal('x');
  });

  it('backs off exponentially per key, capped, and forget() resets the backoff', () => {
    const queue = new WorkQueue({ initialMs: 10, maxMs: 50, spread: [1, 1] });
    expect([queue.addRateLimited('a'), queue.addRateLimited('a'), queue.addRateLimited('a'), queue.addRateLimited('a')]).to.deep.equal([
      10, 20, 40, 50,
    ]);
    expect(queue.addRateLimited('b')).to.equal(10);
    queue.forget('a');
    expect(queue.addRateLimited('a')).to.equal(10);
    queue.shutDown();
  });

  it('re-adds a rate-limited key after its delay, not before', async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue({ initialMs: 30, maxMs: 1000, spread: [1, 1] }, clock);
    queue.addRateLimited('a');
    const next = queue.get();
    await clock.advance(29);
    expect(await handedOut(next)).to.equal('waiting');
    await clock.advance(1);
    expect(await handedOut(next)).to.equal('a');
  });

  it('keeps one timer per key: a later addAfter replaces the earlier one', async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue(undefined, clock);
    queue.addAfter('a', 100);
    queue.addAfter('a', 10);
    await clock.advance(10);
    expect(queue.length).to.equal(1);
    expect(await queue.get()).to.equal('a');
    queue.done('a');
    await clock.advance(100);
    expect(queue.length, 'the replaced timer never fires').to.equal(0);
  });

  it('releases waiting workers on shutdown and ignores later adds', async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue(undefined, clock);
    const waiting = queue.get();
    queue.addAfter('later', 10);
    queue.shutDown();
    expect(await waiting).to.equal(undefined);
    queue.add('a');
    await clock.advance(10);
    expect(queue.length).to.equal(0);
    expect(await queue.get()).to.equal(undefined);
  });
});
