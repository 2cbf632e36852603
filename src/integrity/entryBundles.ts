import { canonicalJson } from '../client/canonicalJson.ts';
import { canonicalDocument } from './documentLeaf.ts';
import { HASH_BYTES } from './tiles.ts';
import { encodeEntryBundle } from './tlogTiles.ts';
import type { LeafDocument } from './transparencyLogStore.ts';

/**
 * An entry bundle of C2SP tlog-tiles from its leaves' events: each leaf's entry is the RFC 8785 canonical
 * JSON of its event as the API serves it, which hashes to the leaf. An entry that cannot (the event was
 * redacted or expired since) says so as JSON instead: the redacted document with its `redaction` member, or
 * `{"event_id", "timestamp", "expired": {...}, "leaf_hash"}`; its leaf in the hash tile is unchanged, and
 * proves the place. `level0` is the bundle's hash tile, the leaves' hashes in order.
 */
export function entryBundleOf(leaves: readonly LeafDocument[], level0: Buffer): Buffer {
  return encodeEntryBundle(
    leaves.map((leaf, position) => bundleEntry(leaf, level0.subarray(position * HASH_BYTES, (position + 1) * HASH_BYTES))),
  );
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
