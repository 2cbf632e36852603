import { expect } from 'chai';
import { WorkQueue } from '../../src/controller/workQueue.ts';

const tick = (ms = 0) => new Promise((resolve) => setTimeout(resolve, ms));

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
    let second: string | undefined;
    void queue.get().then((key) => (second = key));
    await tick();
    expect(second).to.equal(undefined);
    queue.done(first!);
    await tick();
    expect(second).to.equal('a');
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
    const queue = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 50 });
    expect([queue.addRateLimited('a'), queue.addRateLimited('a'), queue.addRateLimited('a'), queue.addRateLimited('a')]).to.deep.equal([
      10, 20, 40, 50,
    ]);
    expect(queue.addRateLimited('b')).to.equal(10);
    queue.forget('a');
    expect(queue.addRateLimited('a')).to.equal(10);
    queue.shutDown();
  });

  it('re-adds a rate-limited key after its delay', async () => {
    const queue = new WorkQueue({ baseDelayMs: 30, maxDelayMs: 1000 });
    queue.addRateLimited('a');
    expect(queue.length).to.equal(0);
    const started = Date.now();
    expect(await queue.get()).to.equal('a');
    expect(Date.now() - started).to.be.at.least(25);
  });

  it('releases waiting workers on shutdown and ignores later adds', async () => {
    const queue = new WorkQueue();
    const waiting = queue.get();
    queue.addAfter('later', 10);
    queue.shutDown();
    expect(await waiting).to.equal(undefined);
    queue.add('a');
    expect(await queue.get()).to.equal(undefined);
  });
});
