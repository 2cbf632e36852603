/**
 * A tlog-tiles entry bundle taken apart as a client does (each entry a big-endian uint16 length, then its bytes):
 * written here from the specification rather than imported, so the tests check the service's encoding against
 * an independent reading of it.
 */
export function decodeBundle(bundle: Buffer): Buffer[] {
  const entries: Buffer[] = [];
  for (let at = 0; at < bundle.length; ) {
    const length = bundle.readUInt16BE(at);
    entries.push(bundle.subarray(at + 2, at + 2 + length));
    at += 2 + length;
  }
  return entries;
}
