import { expect } from 'chai';
import { documentLeaf } from '../../src/integrity/documentLeaf.ts';
import { queuedLeaves, rowsWithoutHashes } from '../../src/integrity/queuedLeaves.ts';
import type { QueueRow, QueuedEvent } from '../../src/integrity/sealQueueStore.ts';

const doc = (id: string) => `{"event_id":"${id}","action":"user.login"}`;
const hashed = (queueId: number, ...ids: string[]): QueueRow => ({
  queueId,
  eventCount: ids.length,
  leafHashes: Buffer.concat(ids.map((id) => documentLeaf(doc(id)))),
});
const unhashed = (queueId: number, eventCount: number): QueueRow => ({ queueId, eventCount, leafHashes: undefined });
const stored = (queueId: number, id: string): QueuedEvent => ({ queueId, document: doc(id), missingKey: undefined });
const gone = (queueId: number, id: string): QueuedEvent => ({
  queueId,
  document: undefined,
  missingKey: { occurredAt: '2026-12-05 06:00:00+00', eventId: id },
});
const leavesOf = (...ids: string[]) => Buffer.concat(ids.map((id) => documentLeaf(doc(id))));

describe('the leaves of the queue rows a sealer takes (queuedLeaves)', () => {
  it('appends the writers’ hashes as they are, each row’s range following the one before from the tree’s size', () => {
    const result = queuedLeaves([hashed(7, 'a', 'b'), hashed(9, 'c')], [], 40);
    expect(result.leaves.equals(leavesOf('a', 'b', 'c'))).to.equal(true);
    expect(result.ranges).to.deep.equal([
      { queueId: 7, firstLeaf: 40, partial: false },
      { queueId: 9, firstLeaf: 42, partial: false },
    ]);
    expect(result.missing).to.deep.equal([]);
  });

  it('hashes the documents of rows their writer gave no hashes, in order with those it did', () => {
    const rows = [hashed(1, 'a'), unhashed(2, 2), hashed(3, 'd')];
    expect(rowsWithoutHashes(rows)).to.deep.equal([2]);
    const result = queuedLeaves(rows, [stored(2, 'b'), stored(2, 'c')], 0);
    expect(result.leaves.equals(leavesOf('a', 'b', 'c', 'd'))).to.equal(true);
    expect(result.ranges.map((range) => range.firstLeaf)).to.deep.equal([0, 1, 3]);
  });

  it('leaves out events gone from the store, marks their row partial and names them', () => {
    const result = queuedLeaves([unhashed(5, 3)], [stored(5, 'a'), gone(5, 'b'), stored(5, 'c')], 10);
    expect(result.leaves.equals(leavesOf('a', 'c'))).to.equal(true);
    expect(result.ranges).to.deep.equal([{ queueId: 5, firstLeaf: 10, partial: true }]);
    expect(result.missing).to.deep.equal(['b']);
  });

  it('gives a row none of whose events remain no range, and the next row its place', () => {
    const result = queuedLeaves([unhashed(5, 1), hashed(6, 'z')], [gone(5, 'x')], 3);
    expect(result.ranges).to.deep.equal([{ queueId: 6, firstLeaf: 3, partial: false }]);
    expect(result.missing).to.deep.equal(['x']);
  });

  it('takes nothing from an empty take', () => {
    const result = queuedLeaves([], [], 0);
    expect(result.leaves.length).to.equal(0);
    expect(result.ranges).to.deep.equal([]);
  });
});
