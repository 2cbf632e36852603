import { expect } from 'chai';
import { createRequire } from 'node:module';
import canonicalize from 'canonicalize';
import { canonicalJson, eventLeafHash, hashLeaf, verifyConsistency, verifyInclusion } from '../../src/client/integrity.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { documentLeaf } from '../../src/integrity/documentLeaf.ts';
import { TileSet, appendLeaves, rightEdgeTiles, tilesForConsistency, tilesForInclusion, type Tile } from '../../src/integrity/tiles.ts';
import { newEvent } from '../support/newEvents.ts';
import { auditPath, consistencyProof, merkleTreeHash } from '../support/rfc9162.ts';

// sigstore's Rekor client verifies RFC 6962 inclusion proofs; a maintained implementation that is not ours.
const { verifyMerkleInclusion } = createRequire(import.meta.url)('@sigstore/verify/dist/tlog/merkle.js') as {
  verifyMerkleInclusion(entry: unknown, checkpoint: unknown): void;
};

const hex = (buffer: Buffer) => buffer.toString('hex');

/** A tree grown through appendLeaves in uneven steps, its tiles kept as a store would keep them. */
function growTree(leaves: readonly Buffer[], steps: readonly number[]): { tiles: Map<string, Tile>; roots: Map<number, string> } {
  const tiles = new Map<string, Tile>();
  const roots = new Map<number, string>();
  let size = 0;
  let step = 0;
  while (size < leaves.length) {
    const count = Math.min(steps[step++ % steps.length]!, leaves.length - size);
    const edge = new TileSet(rightEdgeTiles(size).map((key) => tiles.get(`${key.level}/${key.index}`)!));
    const result = appendLeaves(size, edge, Buffer.concat(leaves.slice(size, size + count).map((leaf) => hashLeaf(leaf))));
    for (const tile of result.tiles) tiles.set(`${tile.level}/${tile.index}`, tile);
    size = result.size;
    roots.set(size, hex(result.root));
  }
  return { tiles, roots };
}

describe('Merkle tree (RFC 9162 §2.1) stored as tiles', function () {
  this.timeout(120_000);
  const leaves = Array.from({ length: 70_000 }, (_, index) => Buffer.from(`{"event":${index}}`));

  it('computes the root of RFC 9162 after every append, whatever the steps', () => {
    for (const steps of [[1], [7, 300, 1, 255, 256, 513], [65_536, 3]]) {
      const sample = leaves.slice(0, steps[0] === 1 ? 600 : 70_000);
      const { roots } = growTree(sample, steps);
      for (const [size, root] of [...roots].filter((_, index) => index % 97 === 0 || index === roots.size - 1)) {
        expect(root, `size ${size}`).to.equal(hex(merkleTreeHash(sample.slice(0, size))));
      }
    }
  });

  it('gives the inclusion proofs of RFC 9162 for any leaf against any older size, which sigstore and our client accept', () => {
    const sample = leaves.slice(0, 1_500);
    const { tiles } = growTree(sample, [13, 256, 700]);
    const store = new TileSet(tiles.values());
    for (const size of [1, 2, 3, 255, 256, 257, 511, 1_000, 1_500]) {
      const root = merkleTreeHash(sample.slice(0, size));
      for (const index of new Set([0, 1, Math.floor(size / 2), size - 2, size - 1].filter((i) => i >= 0 && i < size))) {
        for (const key of tilesForInclusion(index, size)) expect(store.has(key), `tile ${key.level}/${key.index}`).to.equal(true);
        const path = store.inclusionPath(index, size);
        expect(path.map(hex), `leaf ${index} of ${size}`).to.deep.equal(auditPath(index, sample.slice(0, size)).map(hex));
        const proof = { leaf_index: index, tree_size: size, leaf_hash: hex(store.leafHash(index)), audit_path: path.map(hex) };
        expect(verifyInclusion(hex(hashLeaf(sample[index]!)), proof, { tree_size: size, root_hash: hex(root) })).to.deep.equal({
          valid: true,
        });
        verifyMerkleInclusion(
          { canonicalizedBody: sample[index], inclusionProof: { logIndex: String(index), hashes: path } },
          { logSize: BigInt(size), logHash: root },
        );
      }
    }
  });

  it('gives the consistency proofs of RFC 9162, which our client accepts, and refuses altered ones', () => {
    const sample = leaves.slice(0, 1_100);
    const { tiles } = growTree(sample, [100, 3, 256]);
    const store = new TileSet(tiles.values());
    const pairs = [
      [1, 1],
      [1, 2],
      [3, 7],
      [4, 8],
      [255, 256],
      [256, 257],
      [100, 1_100],
      [513, 1_024],
      [1_099, 1_100],
      [6, 6],
    ];
    for (const [first, second] of pairs as Array<[number, number]>) {
      for (const key of tilesForConsistency(first, second)) expect(store.has(key)).to.equal(true);
      const proof = store.consistencyPath(first, second).map(hex);
      expect(proof, `${first} → ${second}`).to.deep.equal(consistencyProof(first, sample.slice(0, second)).map(hex));
      const firstRoot = hex(merkleTreeHash(sample.slice(0, first)));
      const secondRoot = hex(merkleTreeHash(sample.slice(0, second)));
      const heads = (a: string, b: string) =>
        [
          { tree_size: first, root_hash: a },
          { tree_size: second, root_hash: b },
        ] as const;
      expect(verifyConsistency({ first, second, proof }, ...heads(firstRoot, secondRoot))).to.deep.equal({ valid: true });
      const otherRoot = hex(merkleTreeHash([...sample.slice(0, first - 1), Buffer.from('forged')]));
      expect(verifyConsistency({ first, second, proof }, ...heads(otherRoot, secondRoot)).valid).to.equal(false);
      if (proof.length > 0) {
        const altered = [...proof];
        altered[altered.length - 1] = hex(hashLeaf('x'));
        expect(verifyConsistency({ first, second, proof: altered }, ...heads(firstRoot, secondRoot)).valid).to.equal(false);
      }
    }
  });

  it('refuses an inclusion proof for another leaf, index or root', () => {
    const sample = leaves.slice(0, 20);
    const store = new TileSet(growTree(sample, [20]).tiles.values());
    const head = { tree_size: 20, root_hash: hex(merkleTreeHash(sample)) };
    const proof = { leaf_index: 5, tree_size: 20, leaf_hash: hex(hashLeaf(sample[5]!)), audit_path: store.inclusionPath(5, 20).map(hex) };
    expect(verifyInclusion(proof.leaf_hash, proof, head)).to.deep.equal({ valid: true });
    expect(verifyInclusion(hex(hashLeaf(sample[6]!)), proof, head).valid).to.equal(false);
    expect(verifyInclusion(proof.leaf_hash, { ...proof, leaf_index: 4 }, head).valid).to.equal(false);
    expect(verifyInclusion(proof.leaf_hash, { ...proof, tree_size: 21 }, head).valid).to.equal(false);
    expect(verifyInclusion(proof.leaf_hash, { ...proof, audit_path: proof.audit_path.slice(1) }, head).valid).to.equal(false);
    expect(verifyInclusion(proof.leaf_hash, proof, { tree_size: 20, root_hash: hex(merkleTreeHash(sample.slice(0, 19))) }).valid).to.equal(
      false,
    );
  });
});

describe('canonical JSON (RFC 8785)', () => {
  it('agrees with an independent implementation on events, control characters and non-ASCII text', () => {
    const samples: unknown[] = [
      { user_id: 'u', action: 'phi.read', success: true, phi_involved: false, details: '{"b":1,"a":"x"}' },
      { text: 'tab\tnew\nline\r\u0001\u001f\u007f "quoted" back\\slash / solidus' },
      { é: 'café', z: 'Ω≈ç√', '\u20ac': '€', emoji: '😀 \ud83d\ude00', line: '\u2028\u2029' },
      { numbers: [0, -0, 1e21, 1.5e-7, 123456789012345680000, 0.1], nested: { b: [true, null], a: {} } },
      { '\u00e9': 1, 'e\u0301': 2, '\ud83d\ude00': 3, '\uff41': 4, a: 5 },
    ];
    for (const sample of samples) expect(canonicalJson(sample)).to.equal((canonicalize as unknown as (value: unknown) => string)(sample));
  });

  it('refuses strings that are not well-formed Unicode', () => {
    expect(() => canonicalJson({ bad: '\ud800' })).to.throw(TypeError);
  });
});

describe('the leaf of a stored document, without parsing it', () => {
  const alphabet = [
    'a',
    'Z',
    '0',
    ' ',
    '"',
    '\\',
    '/',
    '\n',
    '\t',
    '\u0001',
    '\u001f',
    '\u007f',
    'é',
    '€',
    '\u2028',
    '😀',
    '{',
    '}',
    ',',
    ':',
    '[',
    ']',
  ];
  const randomText = () =>
    Array.from({ length: Math.floor(Math.random() * 12) }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');

  it('hashes every document the write path renders exactly as the general RFC 8785 path does', () => {
    for (let round = 0; round < 2000; round += 1) {
      const event = newEvent({
        userId: randomText(),
        userRole: randomText(),
        resourceType: randomText(),
        resourceId: randomText(),
        userAgent: randomText(),
        justification: randomText(),
        details: JSON.stringify({ note: randomText() }),
        fieldsAccessed: JSON.stringify([randomText()]),
        phiInvolved: round % 2 === 0,
        success: round % 3 === 0,
      });
      const document = renderEventDocument(event, formatTimestamp(event.occurredAtMs));
      expect(documentLeaf(document).toString('hex'), document).to.equal(eventLeafHash(document));
    }
  });

  it('takes the general path for any other JSON text, with the same result', () => {
    const others = [
      '{"b":"x", "a":true}',
      '{"a":"\\u0041","b":"\\/"}',
      '{"a":"x","a":"y"}',
      '{"n":1,"a":"x"}',
      '{"o":{"z":1,"a":2},"a":[1,"x"]}',
      '{"a":"tab\\there"}',
      '{"a":null}',
      '{}',
      '{"é":"x","e":"y"}',
      ' {"a":"x"}',
    ];
    for (const text of others) expect(documentLeaf(text).toString('hex'), text).to.equal(eventLeafHash(text));
  });
});
