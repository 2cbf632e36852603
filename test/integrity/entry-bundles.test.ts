import { expect } from 'chai';
import { hashLeaf } from '../../src/client/merkleHash.ts';
import { canonicalDocument } from '../../src/integrity/documentLeaf.ts';
import { bundleOfKeptEntries, entriesOf, keptEntriesText } from '../../src/integrity/entryBundles.ts';
import { encodeEntryBundle } from '../../src/integrity/tlogTiles.ts';
import type { LeafDocument } from '../../src/integrity/transparencyLogStore.ts';

const DOCUMENT = '{"event_id":"e-1","timestamp":"2026-11-22T10:15:00.123Z","action":"phi.read","details":"{\\"ward\\":\\"3B\\"}"}';

function leaf(fields: Partial<LeafDocument>): LeafDocument {
  return { leafIndex: 0, eventId: 'e-1', timestamp: '2026-11-22T10:15:00.123Z', document: undefined, expired: undefined, ...fields };
}

describe('entry bundles of the C2SP view', () => {
  it('carries each event as its canonical JSON: the bytes whose hash is the leaf', () => {
    const hash = hashLeaf(canonicalDocument(DOCUMENT));
    const [entry] = entriesOf([leaf({ document: DOCUMENT })], hash);
    expect(entry!.toString()).to.equal(canonicalDocument(DOCUMENT));
    expect(hashLeaf(entry!)).to.deep.equal(hash);
  });

  it('says an expired event is gone, with its expiry and the leaf hash that still proves its place', () => {
    const hash = Buffer.alloc(32, 0xab);
    const expired = { expired_at: '2027-01-01T00:00:00.000Z', retain: '30d', source: 'default' };
    const [entry] = entriesOf([leaf({ expired })], hash);
    expect(JSON.parse(entry!.toString())).to.deep.equal({
      event_id: 'e-1',
      timestamp: '2026-11-22T10:15:00.123Z',
      expired,
      leaf_hash: 'ab'.repeat(32),
    });
  });

  it('says missing for an event gone otherwise, and too_large for a document past an entry’s 65,535 bytes', () => {
    const hashes = Buffer.concat([Buffer.alloc(32, 1), Buffer.alloc(32, 2)]);
    const huge = JSON.stringify({ event_id: 'e-2', details: 'x'.repeat(70_000) });
    const [missing, tooLarge] = entriesOf([leaf({}), leaf({ eventId: 'e-2', document: huge })], hashes).map(
      (entry) => JSON.parse(entry.toString()) as Record<string, unknown>,
    );
    expect(missing).to.include({ missing: true, leaf_hash: '01'.repeat(32) });
    expect(tooLarge).to.include({ event_id: 'e-2', too_large: true, leaf_hash: '02'.repeat(32) });
  });

  it('keeps entries as newline-joined text that gives back the same bundle as encoding them', () => {
    const entries = [Buffer.from('{"a":1}'), Buffer.from('{"b":"é"}'), Buffer.from('{}')];
    const text = keptEntriesText(entries)!;
    expect(text).to.equal('{"a":1}\n{"b":"é"}\n{}');
    expect(bundleOfKeptEntries(text)).to.deep.equal(encodeEntryBundle(entries));
    expect(bundleOfKeptEntries('{"only":true}')).to.deep.equal(encodeEntryBundle([Buffer.from('{"only":true}')]));
  });

  it('does not keep entries one of which holds a newline: they could not be told apart again', () => {
    expect(keptEntriesText([Buffer.from('{"a":1}'), Buffer.from('line\nbreak')])).to.equal(undefined);
  });
});
