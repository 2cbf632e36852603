/** At most this many bytes of a receiver's response are kept with an attempt (docs/webhooks.md). */
export const RESPONSE_EXCERPT_BYTES = 1024;

/**
 * The part of a receiver's response body kept in the attempt record, as text Postgres accepts: at most
 * RESPONSE_EXCERPT_BYTES of UTF-8, cut at a character boundary, with bytes that are not UTF-8 and NUL
 * characters (which a text column refuses, failing the whole batch of outcomes it is written with)
 * replaced by U+FFFD. A binary or truncated body still leaves a readable, bounded excerpt.
 */
export function responseExcerpt(body: Buffer): string {
  if (body.length === 0) return '';
  const decoded = decodeWithinBytes(body.subarray(0, RESPONSE_EXCERPT_BYTES)).replaceAll('\u0000', '\uFFFD');
  // Replacement characters take three bytes where the byte they replace took one: cut again if they grew it.
  if (Buffer.byteLength(decoded) <= RESPONSE_EXCERPT_BYTES) return decoded;
  return decodeWithinBytes(Buffer.from(decoded).subarray(0, RESPONSE_EXCERPT_BYTES));
}

// Shared: decode() without { stream: true } keeps no state between calls, and a worker decodes one
// excerpt per attempt.
const UTF8 = new TextDecoder('utf-8', { fatal: false });

/** Decodes, leaving out a character cut off at the end rather than turning it into U+FFFD. */
function decodeWithinBytes(bytes: Buffer): string {
  return UTF8.decode(bytes.subarray(0, completeLength(bytes)));
}

/** The length of `bytes` without a trailing multi-byte sequence that is incomplete. */
function completeLength(bytes: Buffer): number {
  // A UTF-8 sequence is at most 4 bytes: look back at most 3 for its lead byte.
  for (let back = 1; back <= Math.min(3, bytes.length); back += 1) {
    const byte = bytes[bytes.length - back]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: keep looking for the lead
    const needed = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return needed > back ? bytes.length - back : bytes.length;
  }
  return bytes.length;
}
