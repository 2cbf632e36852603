import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { completeSubtrees, consistencyRanges, inclusionRanges, type LeafRange } from '../../src/integrity/proofShapes.ts';
import { auditPath, consistencyProof, merkleTreeHash } from '../support/rfc9162.ts';

/**
 * The subtrees proofs are made of, checked against an independent RFC 9162 implementation (test/support):
 * the hashes of the ranges proofShapes names are exactly the proof the RFC's recursion gives, for every
 * leaf and every pair of sizes up to 40.
 */
const leaves = Array.from({ length: 40 }, (_, index) => createHash('sha256').update(`leaf ${index}`).digest());
const hashOf = (range: LeafRange) => merkleTreeHash(leaves.slice(range.start, range.end));

describe('the shapes of RFC 9162 proofs (proofShapes.ts)', () => {
  it('names the subtrees of every inclusion proof, from the leaf upwards', () => {
    for (let size = 1; size <= leaves.length; size += 1)
      for (let leaf = 0; leaf < size; leaf += 1)
        expect(inclusionRanges(leaf, size).map(hashOf), `leaf ${leaf} of ${size}`).to.deep.equal(auditPath(leaf, leaves.slice(0, size)));
  });

  it('names the subtrees of every consistency proof between two sizes', () => {
    for (let second = 1; second <= leaves.length; second += 1)
      for (let first = 1; first <= second; first += 1)
        expect(consistencyRanges(first, second).map(hashOf), `${first} → ${second}`).to.deep.equal(
          consistencyProof(first, leaves.slice(0, second)),
        );
  });

  it('gives an empty proof for a tree of one leaf, and between equal sizes', () => {
    expect(inclusionRanges(0, 1)).to.deep.equal([]);
    expect(consistencyRanges(7, 7)).to.deep.equal([]);
  });

  it('splits a range into complete aligned subtrees, largest first, that cover it exactly', () => {
    expect(completeSubtrees({ start: 0, end: 13 })).to.deep.equal([
      { level: 3, index: 0 },
      { level: 2, index: 2 },
      { level: 0, index: 12 },
    ]);
    for (const range of [...inclusionRanges(5, 37), ...consistencyRanges(11, 37), { start: 0, end: 40 }]) {
      let at = range.start;
      for (const node of completeSubtrees(range)) {
        const size = 2 ** node.level;
        expect(node.index * size, `aligned in ${range.start}-${range.end}`).to.equal(at);
        at += size;
      }
      expect(at).to.equal(range.end);
    }
  });
});
