import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { verifyExport } from '../../src/client/exportVerifier.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { canonicalDocument } from '../../src/integrity/documentLeaf.ts';
import { TreeHeadSigner } from '../../src/integrity/treeHeadSigner.ts';
import { newEvent } from '../support/newEvents.ts';
import { auditPath, consistencyProof, merkleTreeHash } from '../support/rfc9162.ts';

/**
 * What an offline verifier says about an export's place in the tenant's history: whether a "complete" export
 * lacks leaves, and whether heads the customer saved earlier are prefixes of the export's (consistency
 * proofs), a fork otherwise. The trees are computed by the independent RFC 9162 implementation of test/support.
 */
describe('offline verification: completeness and the history of heads', () => {
  const signer = new TreeHeadSigner(generateKeyPairSync('ed25519').privateKey);
  const trustedKeys = [{ public_key_pem: signer.publicKeyPem }];
  const documentsOf = (label: string) =>
    Array.from({ length: 12 }, (_, index) => {
      const event = newEvent({ tenantId: 'tenant-h', resourceId: `${label}-${index}`, occurredAtMs: Date.UTC(2026, 10, 1) + index });
      return renderEventDocument(event, formatTimestamp(event.occurredAtMs));
    });
  const documents = documentsOf('claim');
  const leaves = documents.map((document) => Buffer.from(canonicalDocument(document)));
  const headOf = (treeLeaves: Buffer[], timestamp: string) =>
    signer.sign({
      tenant_id: 'tenant-h',
      tree_size: treeLeaves.length,
      root_hash: merkleTreeHash(treeLeaves).toString('hex'),
      timestamp,
    });
  const head = headOf(leaves, '2026-11-23T12:00:00.000Z');
  const exportOf = (indexes: number[]) =>
    indexes
      .map((index) => {
        const proof = {
          leaf_index: index,
          tree_size: leaves.length,
          leaf_hash: merkleTreeHash([leaves[index]!]).toString('hex'),
          audit_path: auditPath(index, leaves).map((hash) => hash.toString('hex')),
        };
        return `${documents[index]!.slice(0, -1)},"proof":${JSON.stringify(proof)},"tree_head":${JSON.stringify(head)}}`;
      })
      .join('\n');
  const everything = exportOf(leaves.map((_, index) => index));
  const proofBetween = (first: number) => ({
    first,
    second: leaves.length,
    proof: consistencyProof(first, leaves).map((hash) => hash.toString('hex')),
  });
  const reasons = (report: { failures: Array<{ reason: string }> }) => report.failures.map((failure) => failure.reason);

  it('passes a complete export that holds every leaf below its head', () => {
    expect(verifyExport({ exportText: everything, trustedKeys, complete: true }).failures).to.deep.equal([]);
  });

  it('names the leaves a complete export lacks', () => {
    const report = verifyExport({ exportText: exportOf([0, 1, 2, 3, 4, 7, 8, 9, 10, 11]), trustedKeys, complete: true });
    expect(reasons(report)).to.deep.equal([
      'the export is said to be complete but lacks the events of leaves 5, 6 of the tree head of size 12 signed at 2026-11-23T12:00:00.000Z',
    ]);
    // Without --complete, a filtered export lacks leaves by design.
    expect(verifyExport({ exportText: exportOf([0, 3]), trustedKeys }).failures).to.deep.equal([]);
  });

  it('accepts a saved head that the export’s extends, by its consistency proof', () => {
    const saved = headOf(leaves.slice(0, 5), '2026-11-20T12:00:00.000Z');
    const report = verifyExport({ exportText: everything, trustedKeys, savedHeads: [saved], consistencyProofs: [proofBetween(5)] });
    expect(report).to.deep.include({ failures: [], savedHeads: 1 });
  });

  it('asks for the consistency proof it lacks, saying which to fetch', () => {
    const saved = headOf(leaves.slice(0, 5), '2026-11-20T12:00:00.000Z');
    expect(reasons(verifyExport({ exportText: everything, trustedKeys, savedHeads: [saved] }))).to.deep.equal([
      'no consistency proof between sizes 5 and 12: save GET /audit/integrity/consistency?first=5&second=12 and pass it with --consistency',
    ]);
  });

  it('finds a fork: a saved head of another tree of that size, whatever proof is offered', () => {
    const forked = headOf(
      documentsOf('forged')
        .slice(0, 5)
        .map((document) => Buffer.from(canonicalDocument(document))),
      '2026-11-20T12:00:00.000Z',
    );
    const report = verifyExport({ exportText: everything, trustedKeys, savedHeads: [forked], consistencyProofs: [proofBetween(5)] });
    expect(reasons(report)).to.have.length(1);
    expect(reasons(report)[0]).to.match(
      /^the tree head of size 5 signed at 2026-11-20T12:00:00.000Z and the tree head of size 12 .* are not consistent: /,
    );
  });

  it('finds two different heads for one size', () => {
    const other = headOf([...leaves.slice(0, 11), Buffer.from('{"other":true}')], '2026-11-24T12:00:00.000Z');
    expect(reasons(verifyExport({ exportText: everything, trustedKeys, savedHeads: [other] }))).to.deep.include(
      'two different tree heads for size 12: signed at 2026-11-24T12:00:00.000Z and at 2026-11-23T12:00:00.000Z',
    );
  });
});
