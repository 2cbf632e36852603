import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { verifyExport } from '../../src/client/exportVerifier.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { documentLeaf } from '../../src/integrity/documentLeaf.ts';
import { TileSet, appendLeaves } from '../../src/integrity/tiles.ts';
import { TreeHeadSigner } from '../../src/integrity/treeHeadSigner.ts';
import { newEvent } from '../support/newEvents.ts';

/**
 * The offline verifier on exports built here, apart from the service: a tree of rendered events, a head
 * signed for it, and NDJSON lines shaped as the export's (event, `proof`, `tree_head`).
 */
describe('offline verification of an NDJSON export', () => {
  const signer = new TreeHeadSigner(generateKeyPairSync('ed25519').privateKey);
  const trustedKeys = [{ public_key_pem: signer.publicKeyPem }];
  const documents = Array.from({ length: 40 }, (_, index) => {
    const event = newEvent({ tenantId: 'tenant-v', resourceId: `claim-${index}`, occurredAtMs: Date.UTC(2026, 10, 1) + index });
    return renderEventDocument(event, formatTimestamp(event.occurredAtMs));
  });
  const tiles = new TileSet();
  const appended = appendLeaves(0, tiles, Buffer.concat(documents.map(documentLeaf)));
  for (const tile of appended.tiles) tiles.add(tile);
  const head = signer.sign({
    tenant_id: 'tenant-v',
    tree_size: appended.size,
    root_hash: appended.root.toString('hex'),
    timestamp: '2026-11-23T12:00:00.000Z',
  });
  const line = (document: string, index: number, lineHead: object = head) => {
    const proof = {
      leaf_index: index,
      tree_size: appended.size,
      leaf_hash: tiles.leafHash(index).toString('hex'),
      audit_path: tiles.inclusionPath(index, appended.size).map((hash) => hash.toString('hex')),
    };
    return `${document.slice(0, -1)},"proof":${JSON.stringify(proof)},"tree_head":${JSON.stringify(lineHead)}}`;
  };

  it('proves every event of an untouched export', () => {
    const report = verifyExport({ exportText: `${documents.map((document, index) => line(document, index)).join('\n')}\n`, trustedKeys });
    expect(report.failures).to.deep.equal([]);
    expect(report).to.include({ events: 40, proven: 40, unsealed: 0 });
  });

  it('refuses a line whose tree head was altered but kept the signature, and proves nothing against it', () => {
    // Heads were once told apart by their signature alone: this line would have passed as proven.
    const forged = { ...head, root_hash: tiles.root(20).toString('hex'), tree_size: 20 };
    const lines = documents.map((document, index) => line(document, index));
    const proof = {
      leaf_index: 7,
      tree_size: 20,
      leaf_hash: tiles.leafHash(7).toString('hex'),
      audit_path: tiles.inclusionPath(7, 20).map((hash) => hash.toString('hex')),
    };
    lines[7] = `${documents[7]!.slice(0, -1)},"proof":${JSON.stringify(proof)},"tree_head":${JSON.stringify(forged)}}`;
    const report = verifyExport({ exportText: lines.join('\n'), trustedKeys });
    expect(report.proven).to.equal(39);
    expect(report.failures.map((failure) => failure.reason)).to.deep.include(
      'the tree head of size 20 signed at 2026-11-23T12:00:00.000Z in the export: the signature does not match the tree head',
    );
  });

  it('names an event whose text was changed, and only that one', () => {
    const lines = documents.map((document, index) => line(document, index));
    lines[3] = lines[3]!.replace('"success":true', '"success":false');
    const report = verifyExport({ exportText: lines.join('\n'), trustedKeys });
    const eventId = (JSON.parse(documents[3]!) as { event_id: string }).event_id;
    expect(report.failures).to.deep.equal([{ eventId, reason: "the event does not hash to the proof's leaf_hash" }]);
    expect(report.proven).to.equal(39);
  });
});
