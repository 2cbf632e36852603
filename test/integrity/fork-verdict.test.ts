import { expect } from 'chai';
import { forkVerdict } from '../../src/integrity/forkGuard.ts';

/** The root of the database's tree at each size, as its tiles give it. */
const roots = new Map([
  [5, 'aa'],
  [8, 'bb'],
]);
const rootAt = (size: number) => roots.get(size) ?? 'unknown';

/** docs/integrity.md "The fork guard": a head is signed only for a tree that extends the last one signed. */
describe('whether a new tree head may be signed (forkVerdict)', () => {
  it('signs the first head of a tenant', () => {
    expect(forkVerdict(undefined, { treeSize: 3, rootHash: 'cc' }, rootAt)).to.deep.equal({ consistent: true });
  });

  it('signs a head whose tree, at the size last signed, has the root last signed: the same or a longer tree', () => {
    expect(forkVerdict({ treeSize: 5, rootHash: 'aa' }, { treeSize: 8, rootHash: 'bb' }, rootAt)).to.deep.equal({ consistent: true });
    expect(forkVerdict({ treeSize: 8, rootHash: 'bb' }, { treeSize: 8, rootHash: 'bb' }, rootAt)).to.deep.equal({ consistent: true });
  });

  it('refuses a tree that lost its last commits (fewer leaves than signed), naming both sizes', () => {
    const verdict = forkVerdict({ treeSize: 8, rootHash: 'bb' }, { treeSize: 5, rootHash: 'aa' }, rootAt);
    expect(verdict.consistent).to.equal(false);
    if (verdict.consistent) return;
    expect(verdict.reason).to.equal("a head of 8 leaves was signed, but the database's tree has only 5: it lost its last commits");
    expect(verdict.ledger).to.deep.equal({ treeSize: 8, rootHash: 'bb' });
  });

  it('refuses a tree whose history differs from the one signed', () => {
    const verdict = forkVerdict({ treeSize: 5, rootHash: 'a0' }, { treeSize: 8, rootHash: 'bb' }, rootAt);
    expect(verdict.consistent).to.equal(false);
    if (verdict.consistent) return;
    expect(verdict.reason).to.include('is not the tree the head signed for that size');
  });
});
