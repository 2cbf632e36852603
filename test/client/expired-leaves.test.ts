import { expect } from 'chai';
import { checkExpiredLeaves, expiredLeafClaim, isExpiredRecord } from '../../src/client/expiredLeaves.ts';
import type { SignedTreeHead } from '../../src/client/integrityShapes.ts';
import { auditPath, merkleTreeHash } from '../support/rfc9162.ts';

/**
 * A verifier's view of expired events (docs/integrity.md "Expired events"): a record that a leaf's event
 * expired is proven against the export's head, and reported as expired, never as missing; a record that
 * would hide an event the export still serves is a failure.
 */
const inputs = Array.from({ length: 6 }, (_, index) => Buffer.from(`event ${index}`));
const leafHash = (index: number) => merkleTreeHash([inputs[index]!]).toString('hex');
const head: SignedTreeHead = {
  tenant_id: 't',
  tree_size: inputs.length,
  root_hash: merkleTreeHash(inputs).toString('hex'),
  timestamp: '2026-12-05T06:00:00.000Z',
  key_id: 'k',
  signature: '',
};
const proofOf = (index: number) => ({
  leaf_index: index,
  tree_size: inputs.length,
  leaf_hash: leafHash(index),
  audit_path: auditPath(index, inputs).map((hash) => hash.toString('hex')),
});
const recordOf = (index: number, eventId = `e${index}`) => ({
  expired: {
    event_id: eventId,
    timestamp: '2020-01-01T00:00:00.000Z',
    leaf_index: index,
    leaf_hash: leafHash(index),
    expired_at: '2026-01-01T00:00:00.000Z',
    retain: '6y',
    source: 'default',
  },
});
const context = (owners: Array<[number, string]> = [], ids: string[] = []) => ({
  provenNodes: new Map<SignedTreeHead, Map<string, string>>(),
  headVerdicts: new Map([[head, true]]),
  leafOwners: new Map(owners),
  exportedIds: new Set(ids),
});

describe('expired leaves in a verified export', () => {
  it('tells an expired leaf’s record from an event', () => {
    expect(isExpiredRecord(recordOf(2))).to.equal(true);
    expect(isExpiredRecord({ event_id: 'e1', action: 'phi.read' })).to.equal(false);
  });

  it('reports a proven leaf as expired, with what its record says', () => {
    const { expired, failures } = checkExpiredLeaves([{ exported: recordOf(2), proof: proofOf(2), head }], context([[0, 'e0']], ['e0']));
    expect(failures).to.deep.equal([]);
    expect(expired.get(2)).to.deep.include({ eventId: 'e2', leafIndex: 2, retain: '6y', source: 'default' });
  });

  it('fails a record whose proof does not lead to the head, or is for another leaf', () => {
    const wrong = { ...recordOf(2), expired: { ...recordOf(2).expired, leaf_hash: leafHash(3) } };
    const outcome = checkExpiredLeaves(
      [
        { exported: wrong, proof: { ...proofOf(2), leaf_hash: leafHash(3) }, head },
        { exported: recordOf(4), proof: proofOf(5), head },
      ],
      context(),
    );
    expect(outcome.expired.size).to.equal(0);
    expect(outcome.failures.map((failure) => failure.eventId)).to.deep.equal(['e2', 'e4']);
    expect(outcome.failures[1]!.reason).to.include('its proof is for leaf 5, not leaf 4');
  });

  it('fails a record that would hide an event the export serves, at its leaf or by its id', () => {
    const atLeaf = checkExpiredLeaves([{ exported: recordOf(1), proof: proofOf(1), head }], context([[1, 'e1']]));
    expect(atLeaf.failures[0]!.reason).to.include('event e1 of the export is proven at leaf 1');
    const byId = checkExpiredLeaves([{ exported: recordOf(1, 'served'), proof: proofOf(1), head }], context([], ['served']));
    expect(byId.failures[0]!.reason).to.include('the export serves that event');
  });

  it('takes the same record twice (pages repeat it) once, and two different ones for a leaf as a contradiction', () => {
    const twice = checkExpiredLeaves(
      [
        { exported: recordOf(3), proof: proofOf(3), head },
        { exported: recordOf(3), proof: proofOf(3), head },
      ],
      context(),
    );
    expect(twice.failures).to.deep.equal([]);
    expect(twice.expired.size).to.equal(1);
    const contradicting = checkExpiredLeaves(
      [
        { exported: recordOf(3), proof: proofOf(3), head },
        { exported: recordOf(3, 'other'), proof: proofOf(3), head },
      ],
      context(),
    );
    expect(contradicting.failures[0]!.reason).to.include('two records say leaf 3 expired, for events e3 and other');
  });

  it('names what is wrong with a malformed record, and a record without a proof', () => {
    expect(expiredLeafClaim({ expired: [] })).to.equal('its expired member is not an object');
    expect(expiredLeafClaim({ expired: { ...recordOf(0).expired, leaf_index: -1 } })).to.equal('its leaf_index is not a whole number');
    expect(expiredLeafClaim({ expired: { ...recordOf(0).expired, leaf_hash: 'ab' } })).to.equal('its leaf_hash is not 64 hex digits');
    const unproven = checkExpiredLeaves([{ exported: recordOf(0), proof: null, head }], context());
    expect(unproven.failures[0]!.reason).to.include('it has no proof');
  });

  it('counts no leaf as expired under a head whose signature did not verify', () => {
    const unverified = { ...context(), headVerdicts: new Map([[head, false]]) };
    expect(checkExpiredLeaves([{ exported: recordOf(2), proof: proofOf(2), head }], unverified).expired.size).to.equal(0);
  });
});
