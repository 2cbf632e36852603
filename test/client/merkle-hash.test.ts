import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { hashChildren, hashLeaf, hashLeafHex, sha256 } from '../../src/client/merkleHash.ts';

/** SHA-256 of the parts, written out without the module: what RFC 9162 §2.1.1 defines. */
function digest(...parts: Array<Uint8Array | string>): Buffer {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
}

describe('Merkle hashes (RFC 9162 §2.1.1)', () => {
  it('hashes the empty leaf to the value RFC 6962 trees are known by', () => {
    expect(hashLeafHex('')).to.equal('6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d');
  });

  it('hashes a leaf as SHA-256(0x00 ‖ leaf), from text and from its UTF-8 bytes alike', () => {
    const leaf = '{"action":"phi.read","note":"é😀"}';
    const expected = digest(Buffer.from([0]), Buffer.from(leaf, 'utf8'));
    expect(hashLeaf(leaf)).to.deep.equal(expected);
    expect(hashLeaf(Buffer.from(leaf, 'utf8'))).to.deep.equal(expected);
    expect(hashLeafHex(Buffer.from(leaf, 'utf8'))).to.equal(expected.toString('hex'));
  });

  it('hashes an interior node as SHA-256(0x01 ‖ left ‖ right), order mattering', () => {
    const left = hashLeaf('a');
    const right = hashLeaf('b');
    expect(hashChildren(left, right)).to.deep.equal(digest(Buffer.from([1]), left, right));
    expect(hashChildren(right, left)).to.not.deep.equal(hashChildren(left, right));
  });

  it('gives each node its own result although the input buffer is shared', () => {
    const first = hashChildren(hashLeaf('a'), hashLeaf('b'));
    const second = hashChildren(hashLeaf('c'), hashLeaf('d'));
    expect(first).to.deep.equal(digest(Buffer.from([1]), hashLeaf('a'), hashLeaf('b')));
    expect(second).to.not.deep.equal(first);
  });

  it('hashes children of other lengths the same way, and bytes already prefixed with sha256', () => {
    const short = Buffer.from('0102', 'hex');
    expect(hashChildren(short, short)).to.deep.equal(digest(Buffer.from([1]), short, short));
    expect(sha256(Buffer.from([0, 0x61]))).to.deep.equal(hashLeaf('a'));
  });
});
