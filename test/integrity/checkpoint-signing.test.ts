import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { keyIdOf, verifyTreeHead } from '../../src/client/integrity.ts';
import {
  checkpointText,
  formatSignedNote,
  LOG_SIGNATURE_TYPE,
  logSignatureLine,
  openSignedNote,
  parseCheckpoint,
  parseVerifierKey,
  verifierKeyText,
} from '../../src/client/signedNote.ts';
import { TreeHeadSigner } from '../../src/integrity/treeHeadSigner.ts';

const ORIGIN = 'audit.example/acme';
const ROOT = 'a1'.repeat(32);

// The sealer's key signs two forms of each head: the JSON tree head of the API, and the C2SP checkpoint note.
describe('the sealer’s signatures', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const signer = new TreeHeadSigner(privateKey);

  it('signs a checkpoint note that opens with the tenant log’s verifier key, as any C2SP client opens it', () => {
    const signature = signer.signCheckpoint(ORIGIN, { tree_size: 42, root_hash: ROOT });
    const text = checkpointText({ origin: ORIGIN, size: 42, rootHash: Buffer.from(ROOT, 'hex') });
    expect(text).to.equal(`${ORIGIN}\n42\n${Buffer.from(ROOT, 'hex').toString('base64')}\n`);
    const note = formatSignedNote(text, [logSignatureLine(ORIGIN, publicKey, signature)]);
    const key = parseVerifierKey(verifierKeyText(ORIGIN, LOG_SIGNATURE_TYPE, publicKey));
    const opened = openSignedNote(note, [key]);
    expect(parseCheckpoint(opened.note.text)).to.deep.equal({ origin: ORIGIN, size: 42, rootHash: Buffer.from(ROOT, 'hex') });
  });

  it('signs a checkpoint that does not verify for another size or origin', () => {
    const signature = signer.signCheckpoint(ORIGIN, { tree_size: 42, root_hash: ROOT });
    const key = parseVerifierKey(verifierKeyText(ORIGIN, LOG_SIGNATURE_TYPE, publicKey));
    const otherSize = checkpointText({ origin: ORIGIN, size: 43, rootHash: Buffer.from(ROOT, 'hex') });
    expect(() => openSignedNote(formatSignedNote(otherSize, [logSignatureLine(ORIGIN, publicKey, signature)]), [key])).to.throw(
      /does not verify/,
    );
  });

  it('signs JSON tree heads that verify with its public key, named by its key id', () => {
    const head = signer.sign({ tenant_id: 'acme', tree_size: 42, root_hash: ROOT, timestamp: '2026-12-05T12:00:00.000Z' });
    expect(head.key_id).to.equal(keyIdOf(publicKey));
    expect(signer.keyId).to.equal(head.key_id);
    const trusted = [{ public_key_pem: signer.publicKeyPem }];
    expect(verifyTreeHead(head, trusted)).to.deep.equal({ valid: true });
    expect(verifyTreeHead({ ...head, tree_size: 43 }, trusted)).to.deep.equal({
      valid: false,
      reason: 'the signature does not match the tree head',
    });
    // A head dated after its key was retired is refused even though the signature holds.
    expect(verifyTreeHead(head, [{ ...trusted[0]!, valid_until: '2026-12-01T00:00:00.000Z' }])).to.deep.equal({
      valid: false,
      reason: `signed at 2026-12-05T12:00:00.000Z, after key ${signer.keyId} was retired (2026-12-01T00:00:00.000Z)`,
    });
  });
});
