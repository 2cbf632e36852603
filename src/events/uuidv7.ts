import { randomBytes } from 'node:crypto';
import { systemClock } from '../platform/clock.ts';

/**
 * UUIDv7 (RFC 9562 §5.7): 48 bits of Unix milliseconds, then a 42-bit counter (the 12 bits of rand_a and
 * the first 30 of rand_b, RFC 9562 §6.2 method 1), then 32 random bits. Ids the service assigns sort by
 * time, which keeps the event_id index append-mostly, and ids made one after another in the same
 * millisecond still sort in the order they were made: the counter starts at a random value below 2^41
 * each millisecond and counts up. An id for an earlier millisecond than the last one (a backdated event)
 * starts a fresh counter; ordering is only promised for times that do not go backwards.
 */
const COUNTER_BITS = 42;
const COUNTER_START_LIMIT = 2 ** (COUNTER_BITS - 1);

let lastMs = -1;
let counter = 0;

export function uuidv7(epochMs: number = systemClock.now()): string {
  if (epochMs === lastMs && counter < 2 ** COUNTER_BITS - 1) {
    counter += 1;
  } else {
    lastMs = epochMs;
    counter = randomBytes(6).readUIntBE(0, 6) % COUNTER_START_LIMIT;
  }
  const bytes = Buffer.alloc(16);
  bytes.writeUIntBE(epochMs, 0, 6);
  // 42 counter bits: 12 after the version nibble, 30 after the variant bits.
  const high = Math.floor(counter / 2 ** 30);
  const low = counter % 2 ** 30;
  bytes.writeUInt16BE(0x7000 | high, 6);
  bytes.writeUInt32BE((0x80000000 | low) >>> 0, 8);
  randomBytes(4).copy(bytes, 12);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
