import { expect } from 'chai';
import { type Chunk, ChunksAhead } from '../../src/streams/chunksAhead.ts';

/** Reads the chunks ChunksAhead asks for, recording each read's start. */
function reader(reads: number[]) {
  return (start: number, end: number): Promise<Chunk> => {
    reads.push(start);
    return Promise.resolve({ start, end, batches: [] });
  };
}

/** Sends every chunk `ahead` has, `depth` read ahead of the one sent; returns each one's [start, end]. */
async function sendAll(ahead: ChunksAhead, depth: number): Promise<Array<[number, number]>> {
  const sent: Array<[number, number]> = [];
  for (let next = ahead.next(); next; next = ahead.next()) {
    const chunk = await next;
    ahead.fill(depth);
    expect(ahead.queued).to.be.at.most(depth);
    sent.push([chunk.start, chunk.end]);
  }
  return sent;
}

describe('chunks read ahead', () => {
  it('reads each chunk once, in order, as many ahead as asked, and stops at the tree’s end', async () => {
    const reads: number[] = [];
    const sent = await sendAll(new ChunksAhead('t', 20, 65, 10, reader(reads)), 2);
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
    const before = new ChunksAhead('t', 0, 100, 10, reader(reads));
    await before.next();
    before.fill(2);
    expect(reads).to.deep.equal([0, 10, 20]);
    expect(new ChunksAhead('other', 10, 200, 10, reader(reads), before).queued).to.equal(0);
    expect(new ChunksAhead('t', 20, 200, 10, reader(reads), before).queued).to.equal(0);
    // The next pass: the tree grew, and the position is where the chunk sent last ended.
    const continued = new ChunksAhead('t', 10, 200, 10, reader(reads), before);
    expect(continued.queued).to.equal(2);
    expect((await continued.next())!.start).to.equal(10);
    continued.fill(2);
    expect(reads).to.deep.equal([0, 10, 20, 30]);
    expect(before.freshWithin(1_000)).to.equal(true);
    expect(before.freshWithin(1_000, Date.now() + 1_001)).to.equal(false);
    expect(new ChunksAhead('t', 0, 0, 10, reader(reads)).freshWithin(1_000)).to.equal(false);
  });

  it('goes on right after a carried chunk that ended at the tree’s end then, when the tree has grown since', async () => {
    const reads: number[] = [];
    // A pass over a tree of 25 leaves ends with the last, short chunk [20, 24] read ahead and not sent.
    const before = new ChunksAhead('t', 0, 25, 10, reader(reads));
    await before.next();
    before.fill(2);
    // The next pass, over 60 leaves: from 25, not 30, which would skip leaves 25 to 29.
    const sent = await sendAll(new ChunksAhead('t', 10, 60, 10, reader(reads), before), 2);
    expect(sent).to.deep.equal([
      [10, 19],
      [20, 24],
      [25, 34],
      [35, 44],
      [45, 54],
      [55, 59],
    ]);
  });
});
