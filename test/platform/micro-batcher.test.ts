import { expect } from 'chai';
import { MicroBatcher } from '../../src/platform/microBatcher.ts';
import { ManualClock } from '../support/manual-clock.ts';

/** A write the test finishes by hand, so that "a write is in progress" is a state the test controls. */
class Writes {
  readonly batches: number[][] = [];
  private readonly finishers: Array<(error?: Error) => void> = [];

  readonly write = (batch: number[]): Promise<void> => {
    this.batches.push(batch);
    return new Promise((resolve, reject) => this.finishers.push((error) => (error ? reject(error) : resolve())));
  };

  /** Finishes the oldest write in progress, successfully or with `error`, and lets its follow-ups run. */
  async finish(error?: Error): Promise<void> {
    this.finishers.shift()!(error);
    await settle();
  }

  get inProgress(): number {
    return this.finishers.length;
  }
}

async function settle(): Promise<void> {
  for (let round = 0; round < 3; round += 1) await new Promise((resolve) => setImmediate(resolve));
}

function batcher(writes: Writes, clock: ManualClock, options: { concurrency?: number; maxBatch?: number } = {}) {
  const failed: Array<{ error: Error; batch: number[] }> = [];
  const instance = new MicroBatcher<number>({
    size: 3,
    lingerMs: 20,
    write: writes.write,
    onError: (error, batch) => failed.push({ error, batch }),
    clock,
    ...options,
  });
  return { instance, failed };
}

describe('MicroBatcher', () => {
  it('writes a full batch at once, without waiting for the linger', () => {
    const writes = new Writes();
    const { instance } = batcher(writes, new ManualClock());
    for (const item of [1, 2, 3]) instance.add(item);
    expect(writes.batches).to.deep.equal([[1, 2, 3]]);
  });

  it('writes an item someone waits for at once with what waits, or right after the write in progress', async () => {
    const writes = new Writes();
    const { instance } = batcher(writes, new ManualClock());
    instance.add(1);
    instance.add(2, true);
    expect(writes.batches, 'no write in progress: at once, without the linger').to.deep.equal([[1, 2]]);
    instance.add(3, true);
    expect(writes.batches, 'a write in progress: nothing more yet').to.have.length(1);
    await writes.finish();
    expect(writes.batches, 'right after it').to.deep.equal([[1, 2], [3]]);
  });

  it('writes a partial batch when the linger after its first item has passed, not before', async () => {
    const clock = new ManualClock();
    const writes = new Writes();
    const { instance } = batcher(writes, clock);
    instance.add(1);
    await clock.advance(10);
    instance.add(2);
    await clock.advance(9);
    expect(writes.batches).to.deep.equal([]);
    await clock.advance(1);
    expect(writes.batches).to.deep.equal([[1, 2]]);
  });

  it('serialised: what arrives during a write waits, then goes as one larger batch (up to maxBatch)', async () => {
    const clock = new ManualClock();
    const writes = new Writes();
    const { instance } = batcher(writes, clock, { maxBatch: 5 });
    for (const item of [1, 2, 3]) instance.add(item);
    for (const item of [4, 5, 6, 7, 8, 9]) instance.add(item);
    expect(writes.batches).to.deep.equal([[1, 2, 3]]);
    await writes.finish();
    expect(writes.batches).to.deep.equal([
      [1, 2, 3],
      [4, 5, 6, 7, 8],
    ]);
    // The one left over is not a full batch: it waits for the linger.
    await writes.finish();
    expect(writes.batches).to.have.length(2);
    await clock.advance(20);
    expect(writes.batches[2]).to.deep.equal([9]);
  });

  it('with several slots, writes batches side by side and holds the producer back when all are busy', async () => {
    const writes = new Writes();
    const { instance } = batcher(writes, new ManualClock(), { concurrency: 2 });
    for (const item of [1, 2, 3, 4, 5, 6]) instance.add(item);
    expect(writes.inProgress).to.equal(2);
    for (const item of [7, 8, 9]) instance.add(item);
    let roomMade = false;
    void instance.room().then(() => (roomMade = true));
    await settle();
    expect(roomMade, 'a full batch waits for a slot').to.equal(false);
    await writes.finish();
    expect(roomMade).to.equal(true);
    expect(writes.batches).to.deep.equal([
      [1, 2, 3],
      [4, 5, 6],
      [7, 8, 9],
    ]);
  });

  it('hands a failed batch to onError and carries on with the next', async () => {
    const clock = new ManualClock();
    const writes = new Writes();
    const { instance, failed } = batcher(writes, clock);
    for (const item of [1, 2, 3]) instance.add(item);
    instance.add(4);
    await writes.finish(new Error('database gone'));
    expect(failed).to.have.length(1);
    expect(failed[0]!.error.message).to.equal('database gone');
    expect(failed[0]!.batch).to.deep.equal([1, 2, 3]);
    await clock.advance(20);
    expect(writes.batches[1]).to.deep.equal([4]);
  });

  it('drain writes what waits whatever its size and resolves when nothing is left in progress', async () => {
    const writes = new Writes();
    const { instance } = batcher(writes, new ManualClock());
    instance.add(1);
    let drained = false;
    const draining = instance.drain().then(() => (drained = true));
    await settle();
    expect(writes.batches).to.deep.equal([[1]]);
    expect(drained).to.equal(false);
    await writes.finish();
    await draining;
    expect(drained).to.equal(true);
  });

  it('takeWaiting gives back what was not yet written and cancels its linger', async () => {
    const clock = new ManualClock();
    const writes = new Writes();
    const { instance } = batcher(writes, clock);
    instance.add(1);
    instance.add(2);
    expect(instance.takeWaiting()).to.deep.equal([1, 2]);
    await clock.advance(100);
    expect(writes.batches).to.deep.equal([]);
    expect(instance.waiting).to.equal(0);
  });
});
