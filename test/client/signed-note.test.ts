import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import {
  COSIGNATURE_TYPE,
  cosignCheckpoint,
  NoteFormatError,
  openSignedNote,
  parseVerifierKey,
  verifierKeyText,
} from '../../src/client/signedNote.ts';
import { parseTlogTilePath, tilesBetween, tlogTilePath } from '../../src/integrity/tlogTiles.ts';

/** The signed-note and tlog-tiles formats against the examples of their C2SP specifications, and edge cases. */
describe('signed notes and tile paths, as C2SP writes them', () => {
  it("verifies signed-note's own example note with its example verifier key", () => {
    const key = parseVerifierKey('example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k');
    const note =
      'This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';
    expect(openSignedNote(note, [key]).note.text).to.equal('This is an example message.\n');
    expect(() => openSignedNote(note.replace('example message', 'exemplary message'), [key])).to.throw(NoteFormatError, /does not verify/);
  });

  it('reads a verifier key whose base64 holds a plus, and refuses one whose key id does not match', () => {
    for (let attempt = 0; attempt < 200; attempt += 1) {
      const text = verifierKeyText('w.example/a', COSIGNATURE_TYPE, generateKeyPairSync('ed25519').privateKey);
      if (text.split('+').length <= 3) continue;
      expect(parseVerifierKey(text).text).to.equal(text);
      const [name, , material] = [text.slice(0, text.indexOf('+')), '', text.slice(text.indexOf('+', text.indexOf('+') + 1) + 1)];
      expect(() => parseVerifierKey(`${name}+00000000+${material}`)).to.throw(NoteFormatError, /key id does not match/);
      return;
    }
    expect.fail('no key with a plus in 200 tries');
  });

  it('ignores a cosignature by an unknown key and verifies one by a known key (tlog-cosignature/v1)', () => {
    const log = generateKeyPairSync('ed25519').privateKey;
    const witness = generateKeyPairSync('ed25519').privateKey;
    const logKey = parseVerifierKey(verifierKeyText('log.example/t', 0x01, log));
    const witnessKey = parseVerifierKey(verifierKeyText('w.example/a', COSIGNATURE_TYPE, witness));
    const text = 'log.example/t\n5\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';
    const note = `${text}\n${cosignCheckpoint(text, 'w.example/a', witness, 1_700_000_000)}\n`;
    expect(() => openSignedNote(note, [logKey])).to.throw(NoteFormatError, /no signature by a trusted key/);
    expect(openSignedNote(note, [witnessKey]).verifiedBy.map((key) => key.name)).to.deep.equal(['w.example/a']);
  });

  it('names tiles as tlog-tiles does, and reads back only what it names', () => {
    expect(tlogTilePath({ level: 0, index: 1234067, width: 256 })).to.equal('0/x001/x234/067');
    expect(tlogTilePath({ level: 'entries', index: 5, width: 17 })).to.equal('entries/005.p/17');
    expect(parseTlogTilePath('1/x001/x234/067.p/255')).to.deep.equal({ level: 1, index: 1234067, width: 255 });
    for (const bad of ['0/1', '00/000', '64/000', '0/000.p/256', '0/000.p/0', '0/x000/001', '0/001/x002', 'data/000']) {
      expect(parseTlogTilePath(bad), bad).to.equal(undefined);
    }
    // A tree of 70,000 leaves, as the specification counts its tiles: 273 full level-0 tiles, a partial one of
    // 112, a full level-1 tile, a partial one of 17 and a level-2 tile of 1.
    const hashTiles = tilesBetween(0, 70_000).filter((tile) => tile.level !== 'entries');
    expect(hashTiles.filter((tile) => tile.level === 0 && tile.width === 256)).to.have.length(273);
    expect(hashTiles.filter((tile) => tile.width < 256).map((tile) => [tile.level, tile.width])).to.deep.equal([
      [0, 112],
      [1, 17],
      [2, 1],
    ]);
    expect(hashTiles.filter((tile) => tile.level === 1 && tile.width === 256)).to.have.length(1);
  });
});
