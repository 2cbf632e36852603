import { canonicalJson } from '../client/canonicalJson.ts';
import { canonicalDocument } from './documentLeaf.ts';
import { HASH_BYTES } from './tiles.ts';
import type { LeafDocument } from './transparencyLogStore.ts';

/**
 * An entry bundle of C2SP tlog-tiles from its leaves' events: each leaf's entry is the RFC 8785 canonical
 * JSON of its event as the API serves it, which hashes to the leaf. An entry that cannot (the event was
 * redacted or expired since) says so as JSON instead: the redacted document with its `redaction` member, or
 * `{"event_id", "timestamp", "expired": {...}, "leaf_hash"}`; its leaf in the hash tile is unchanged, and
 * proves the place. `level0` is the bundle's hash tile, the leaves' hashes in order.
 */
export function entriesOf(leaves: readonly LeafDocument[], level0: Buffer): Buffer[] {
  return leaves.map((leaf, position) => bundleEntry(leaf, level0.subarray(position * HASH_BYTES, (position + 1) * HASH_BYTES)));
}

const NEWLINE = 0x0a;

/**
 * A bundle's entries as kept (entryBundleStore.ts): joined by newlines, which canonical JSON never holds (it
 * escapes control characters); undefined, not to be kept, should an entry hold one all the same.
 */
export function keptEntriesText(entries: readonly Buffer[]): string | undefined {
  if (entries.some((entry) => entry.includes(NEWLINE))) return undefined;
  return entries.map((entry) => entry.toString('utf8')).join('\n');
}

/**
 * The bundle of kept entries: each newline-separated entry as a big-endian uint16 length and its bytes.
 * Entries are found in the string and each is encoded straight into the bundle: encoding the text once and
 * copying each entry out of it cost twice as much CPU (86 against 54 µs for a 105 kB bundle), most of it in
 * the calls into Node's C++ per entry (a search and a copy) that V8's own string search does not make.
 */
export function bundleOfKeptEntries(text: string): Buffer {
  let count = 1;
  for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) count += 1;
  // Each newline becomes a length, and the first entry gets one too.
  const bundle = Buffer.allocUnsafe(Buffer.byteLength(text, 'utf8') + count + 1);
  let from = 0;
  let to = 0;
  for (;;) {
    const end = text.indexOf('\n', from);
    const written = bundle.write(text.slice(from, end < 0 ? text.length : end), to + 2, 'utf8');
    bundle.writeUInt16BE(written, to);
    to += 2 + written;
    if (end < 0) return bundle;
    from = end + 1;
  }
}

function bundleEntry(leaf: LeafDocument, leafHash: Buffer): Buffer {
  if (leaf.document !== undefined) {
    const canonical = Buffer.from(canonicalDocument(leaf.document));
    // As sealed, or redacted since (then its `redaction` member carries the leaf hash).
    if (canonical.length <= 0xffff) return canonical;
  }
  const gone = leaf.document !== undefined ? { too_large: true } : leaf.expired ? { expired: leaf.expired } : { missing: true };
  return Buffer.from(canonicalJson({ event_id: leaf.eventId, timestamp: leaf.timestamp, ...gone, leaf_hash: leafHash.toString('hex') }));
}
