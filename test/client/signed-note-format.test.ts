import { expect } from 'chai';
import { createHash, generateKeyPairSync } from 'node:crypto';
import {
  COSIGNATURE_TYPE,
  checkpointText,
  cosignCheckpoint,
  isKeyName,
  NoteFormatError,
  parseCheckpoint,
  parseSignatureLine,
  parseSignedNote,
  parseVerifierKey,
  verifierKeyText,
  verifyNoteSignature,
} from '../../src/client/signedNote.ts';

const ROOT = Buffer.alloc(32, 7);

// C2SP signed-note and tlog-checkpoint: what a note and a checkpoint may hold, each refusal named.
describe('signed notes and checkpoints, their format', () => {
  it('writes a checkpoint as three lines and reads it back', () => {
    const checkpoint = { origin: 'audit.example/acme', size: 2 ** 40, rootHash: ROOT };
    expect(parseCheckpoint(checkpointText(checkpoint))).to.deep.equal(checkpoint);
  });

  it('refuses checkpoints that are not three lines of origin, decimal size and a base64 hash', () => {
    const cases: Array<[string, RegExp]> = [
      [`o\n1\n${ROOT.toString('base64')}\nextension\n`, /three lines/],
      [`o\n1\n${ROOT.toString('base64')}`, /three lines/],
      [`\n1\n${ROOT.toString('base64')}\n`, /origin line is empty/],
      [`o\n01\n${ROOT.toString('base64')}\n`, /not a decimal tree size/],
      [`o\n-1\n${ROOT.toString('base64')}\n`, /not a decimal tree size/],
      [`o\n99999999999999999\n${ROOT.toString('base64')}\n`, /not a decimal tree size/],
      [`o\n1\n${Buffer.alloc(31).toString('base64')}\n`, /base64 of 32 bytes/],
    ];
    for (const [text, reason] of cases) expect(() => parseCheckpoint(text), JSON.stringify(text)).to.throw(NoteFormatError, reason);
  });

  it('splits a note at its last blank line, and refuses one without a blank line before them, a final newline, or with controls', () => {
    const line = `\u2014 k ${Buffer.alloc(10, 1).toString('base64')}`;
    expect(parseSignedNote(`text\n\nmore\n\n${line}\n`).text).to.equal('text\n\nmore\n');
    expect(() => parseSignedNote(`text\n\n${line}`)).to.throw(NoteFormatError, /ends with a newline/);
    expect(() => parseSignedNote(`text\n${line}\n`)).to.throw(NoteFormatError, /blank line/);
    expect(() => parseSignedNote(`te\txt\n\n${line}\n`)).to.throw(NoteFormatError, /control characters/);
  });

  it('reads signature lines as an em dash, a key name and the base64 of a key id and a signature', () => {
    const parsed = parseSignatureLine(`\u2014 log.example/a ${Buffer.from([1, 2, 3, 4, 9]).toString('base64')}`);
    expect([parsed.name, parsed.keyId.toString('hex'), parsed.signature.toString('hex')]).to.deep.equal([
      'log.example/a',
      '01020304',
      '09',
    ]);
    expect(() => parseSignatureLine(`- log ${Buffer.alloc(5).toString('base64')}`)).to.throw(NoteFormatError);
    expect(() => parseSignatureLine(`\u2014 log ${Buffer.alloc(4).toString('base64')}`)).to.throw(NoteFormatError, /at least one byte/);
  });

  it('takes key names without spaces, pluses or controls', () => {
    expect(['log.example/a', 'ü'].map(isKeyName)).to.deep.equal([true, true]);
    expect(['', 'a b', 'a+b', 'a\u0001'].map(isKeyName)).to.deep.equal([false, false, false, false]);
  });

  it('refuses verifier keys with a bad name, key id or key type', () => {
    const { publicKey } = generateKeyPairSync('ed25519');
    const good = verifierKeyText('w.example', COSIGNATURE_TYPE, publicKey);
    const [name, id, material] = [good.split('+')[0]!, good.split('+')[1]!, good.split('+').slice(2).join('+')];
    const bytes = Buffer.from(material, 'base64');
    expect(() => parseVerifierKey('no-pluses')).to.throw(NoteFormatError, /<name>\+<key id>\+<key>/);
    expect(() => parseVerifierKey(`a b+${id}+${material}`)).to.throw(NoteFormatError, /empty or holds a space/);
    // Upper case letters for certain: a random key id of digits only (2 % of them) reads the same in upper case.
    expect(() => parseVerifierKey(`${name}+${id.slice(0, 6)}AB+${material}`)).to.throw(NoteFormatError, /8 lowercase hex/);
    const otherType = Buffer.concat([Buffer.from([0x02]), bytes.subarray(1)]).toString('base64');
    expect(() => parseVerifierKey(`${name}+${id}+${otherType}`)).to.throw(NoteFormatError, /only Ed25519 keys/);
    expect(() => parseVerifierKey(`other+${id}+${material}`)).to.throw(NoteFormatError, /key id does not match/);
    expect(parseVerifierKey(` ${good}\n`).text).to.equal(good);
  });

  it('writes a verifier key as docs/integrity.md says: <origin>+<key id>+<base64(type ‖ public key)>', () => {
    const { publicKey } = generateKeyPairSync('ed25519');
    const raw = publicKey.export({ type: 'spki', format: 'der' }).subarray(-32);
    const keyId = createHash('sha256')
      .update(Buffer.concat([Buffer.from('audit.example/acme'), Buffer.from([0x0a, 0x01]), raw]))
      .digest()
      .subarray(0, 4);
    expect(verifierKeyText('audit.example/acme', 0x01, publicKey)).to.equal(
      `audit.example/acme+${keyId.toString('hex')}+${Buffer.concat([Buffer.from([0x01]), raw]).toString('base64')}`,
    );
  });

  it('gives a cosignature’s time, and refuses it for another text', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const key = parseVerifierKey(verifierKeyText('w.example', COSIGNATURE_TYPE, publicKey));
    const text = checkpointText({ origin: 'o', size: 1, rootHash: ROOT });
    const signature = parseSignatureLine(cosignCheckpoint(text, 'w.example', privateKey, 1_800_000_000));
    expect(signature.signature).to.have.length(72);
    expect(verifyNoteSignature(text, signature, key)).to.deep.equal({ valid: true, timestamp: 1_800_000_000 });
    expect(verifyNoteSignature(`${text}x\n`, signature, key).valid).to.equal(false);
  });
});
