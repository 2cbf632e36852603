import { expect } from 'chai';
import { type Chunk, ChunksAhead } from '../../src/streams/chunksAhead.ts';

/** Chunks of 10 leaves over a tree of `size`, recording each read's start. */
function reader(size: number, reads: number[]) {
  return (start: number): Promise<Chunk> => {
    reads.push(start);
    return Promise.resolve({ start, end: Math.min(start + 10, size) - 1, batches: [] });
  };
}

describe('chunks read ahead', () => {
  it('reads each chunk once, in order, as many ahead as asked, and stops at the tree’s end', async () => {
    const reads: number[] = [];
    const ahead = new ChunksAhead('t', 20, 65, 10, reader(65, reads));
    const sent: Array<[number, number]> = [];
    for (let next = ahead.next(); next; next = ahead.next()) {
      const chunk = await next;
      ahead.fill(2);
      expect(ahead.queued).to.be.at.most(2);
      sent.push([chunk.start, chunk.end]);
    }
    expect(sent).to.deep.equal([
      [20, 29],
      [30, 39],
      [40, 49],
      [50, 59],
      [60, 64],
    ]);
    expect(reads).to.deep.equal([20, 30, 40, 50, 60]);
  });

  it('continues the pass before’s chunks only from the same tenant and position, and only while fresh', async () => {
    const reads: number[] = [];
    const before = new ChunksAhead('t', 0, 100, 10, reader(100, reads));
    await before.next();
    before.fill(2);
    expect(reads).to.deep.equal([0, 10, 20]);
    expect(new ChunksAhead('other', 10, 200, 10, reader(200, reads), before).queued).to.equal(0);
    expect(new ChunksAhead('t', 20, 200, 10, reader(200, reads), before).queued).to.equal(0);
    // The next pass: the tree grew, and the position is where the chunk sent last ended.
    const continued = new ChunksAhead('t', 10, 200, 10, reader(200, reads), before);
    expect(continued.queued).to.equal(2);
    expect((await continued.next())!.start).to.equal(10);
    continued.fill(2);
    expect(reads).to.deep.equal([0, 10, 20, 30]);
    expect(before.freshWithin(1_000)).to.equal(true);
    expect(before.freshWithin(1_000, Date.now() + 1_001)).to.equal(false);
    expect(new ChunksAhead('t', 0, 0, 10, reader(0, reads)).freshWithin(1_000)).to.equal(false);
  });
});
