import { isUtf8 } from 'node:buffer';
import { getLocation } from 'jsonc-parser';
import { InvalidJsonError, ValidationError } from './errors.ts';

/**
 * JSON input as bytes (an HTTP body, a JetStream message, a line of an import file), decoded only if it is
 * valid UTF-8. Decoders replace invalid bytes with U+FFFD without a word, so an event carrying 0xFF 0xFE in
 * user_id was stored as "\uFFFD\uFFFD" and acknowledged: the record differed from what its producer sent.
 * Here such input is refused with the documented 422, naming the field that holds the first invalid byte
 * (`events.3.user_id`), before anything parses it.
 */

/** Parses JSON bytes; InvalidJsonError (400) when they are not JSON, ValidationError (422) when not UTF-8. */
export function parseUtf8Json(bytes: Uint8Array, prefix?: string): unknown {
  const text = decodeUtf8Json(bytes, prefix);
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidJsonError('The body is not valid JSON.');
  }
}

/** The bytes as text, or the 422 naming where the first invalid UTF-8 sequence sits. */
function decodeUtf8Json(bytes: Uint8Array, prefix?: string): string {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (isUtf8(buffer)) return buffer.toString('utf8');
  const offset = firstInvalidByte(buffer);
  // The prefix before it is valid, so its decoded length is exactly where the replacement character
  // stands in the leniently decoded text, which a JSON scanner can place in the document.
  const at = buffer.subarray(0, offset).toString('utf8').length;
  const location = getLocation(buffer.toString('utf8'), at);
  const path = location.path.map(String);
  const inKey = location.isAtPropertyKey;
  const field = [prefix, ...(inKey ? path.slice(0, -1) : path)].filter((part) => part !== undefined && part !== '').join('.') || '(body)';
  const byte = `0x${buffer[offset]!.toString(16).toUpperCase().padStart(2, '0')}`;
  const message = inKey
    ? `has a key that is not valid UTF-8 text (byte ${byte} at offset ${offset})`
    : `must be valid UTF-8 text (byte ${byte} at offset ${offset} is not)`;
  return reject(field, message);
}

function reject(field: string, message: string): never {
  throw new ValidationError([{ field, message }], `${field}: ${message}`);
}

/**
 * Offset of the first byte that does not belong to a well-formed UTF-8 sequence (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF); the buffer's length when there is none.
 */
export function firstInvalidByte(bytes: Uint8Array): number {
  let index = 0;
  while (index < bytes.length) {
    const lead = bytes[index]!;
    if (lead < 0x80) {
      index += 1;
      continue;
    }
    let length: number;
    let low = 0x80;
    let high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) length = 2;
    else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      if (lead === 0xe0) low = 0xa0;
      if (lead === 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      if (lead === 0xf0) low = 0x90;
      if (lead === 0xf4) high = 0x8f;
    } else return index;
    for (let next = 1; next < length; next += 1) {
      const byte = bytes[index + next];
      const [min, max] = next === 1 ? [low, high] : [0x80, 0xbf];
      if (byte === undefined || byte < min || byte > max) return index;
    }
    index += length;
  }
  return index;
}
