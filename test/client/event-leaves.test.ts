import { expect } from 'chai';
import { createHash, generateKeyPairSync } from 'node:crypto';
import {
  eventFromExportLine,
  eventLeafHash,
  exportedEventLeafHash,
  keyIdOf,
  treeHeadSigningInput,
  verifyTreeHead,
} from '../../src/client/integrity.ts';
import { hashLeafHex } from '../../src/client/merkleHash.ts';

const EVENT = { event_id: 'e-1', action: 'phi.read', details: '{"ward":"3B"}', phi_involved: true, tenant_id: 'acme' };
const PROOF = { leaf_index: 4, tree_size: 9, audit_path: [] };
const HEAD = { tenant_id: 'acme', tree_size: 9, root_hash: 'a1'.repeat(32), timestamp: '2026-12-05T12:00:00.000Z', key_id: 'k' };

// What a customer's verifier computes from an export without the service: leaves of events, signed bytes of heads.
describe('event leaves and tree heads, as a verifier computes them', () => {
  it('hashes an event as its RFC 8785 form: its members’ order and the text’s spacing do not matter', () => {
    const expected = hashLeafHex(
      '{"action":"phi.read","details":"{\\"ward\\":\\"3B\\"}","event_id":"e-1","phi_involved":true,"tenant_id":"acme"}',
    );
    expect(eventLeafHash(EVENT)).to.equal(expected);
    expect(eventLeafHash(JSON.stringify(EVENT, null, 2))).to.equal(expected);
    const { action, ...rest } = EVENT;
    expect(eventLeafHash({ ...rest, action })).to.equal(expected);
  });

  it('hashes an exported event without the proof and tree head the export adds beside it', () => {
    const line = { ...EVENT, proof: PROOF, tree_head: HEAD };
    expect(exportedEventLeafHash(line)).to.equal(eventLeafHash(EVENT));
    expect(eventFromExportLine(JSON.stringify(line))).to.deep.equal({ event: EVENT, proof: PROOF, treeHead: HEAD });
    expect(() => exportedEventLeafHash([] as unknown as Record<string, unknown>)).to.throw(TypeError, /JSON object/);
  });

  it('signs exactly the five fields of a head, in canonical form, whatever else it carries', () => {
    const expected = `{"key_id":"k","root_hash":"${'a1'.repeat(32)}","tenant_id":"acme","timestamp":"2026-12-05T12:00:00.000Z","tree_size":9}`;
    expect(treeHeadSigningInput(HEAD)).to.equal(expected);
    expect(treeHeadSigningInput({ ...HEAD, extra: 'ignored' } as typeof HEAD)).to.equal(expected);
  });

  it('names a key by the first 16 bytes of the SHA-256 of its SPKI, from a PEM or a key alike', () => {
    const { publicKey } = generateKeyPairSync('ed25519');
    const expected = createHash('sha256')
      .update(publicKey.export({ type: 'spki', format: 'der' }))
      .digest('hex')
      .slice(0, 32);
    expect(keyIdOf(publicKey)).to.equal(expected);
    expect(keyIdOf(publicKey.export({ type: 'spki', format: 'pem' }).toString())).to.equal(expected);
  });

  it('refuses a malformed head before any signature check, saying what is wrong', () => {
    const head = { ...HEAD, signature: 'c2ln' };
    const reasons = [
      { ...head, tree_size: -1 },
      { ...head, root_hash: 'A1'.repeat(32) },
      { ...head, timestamp: 'yesterday' },
      { ...head, key_id: 5 as unknown as string },
      head,
    ].map((candidate) => verifyTreeHead(candidate, []));
    expect(reasons).to.deep.equal([
      { valid: false, reason: 'tree_size is not a non-negative integer' },
      { valid: false, reason: 'root_hash is not 64 lowercase hex digits' },
      { valid: false, reason: 'timestamp is not a time' },
      { valid: false, reason: 'tenant_id, key_id and signature must be strings' },
      { valid: false, reason: 'signed by key k, which is not among the trusted keys' },
    ]);
  });
});
