/**
 * Field rules shared by ingestion, the read filters and webhook filters, so that a value the API accepts
 * as a filter is one that an event could actually carry.
 */

/** Dotted lowercase slug: `phi.read`, `admin.key.create`. */
export const ACTION_PATTERN = /^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$/;
export const ACTION_MAX_LENGTH = 128;

/** An action, or a family of them ending in a dot: `phi.` (the prefix filter, matched as webhook filters are). */
export const ACTION_PREFIX_PATTERN = /^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*\.?$/;

/** Tenant ids appear in NATS subjects (`audit.ingest.<tenant_id>`), so no dots, spaces or wildcards. */
export const TENANT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export const RESOURCE_TYPE_MAX_LENGTH = 128;
export const IDENTIFIER_MAX_LENGTH = 256;

/** Canonical UUID text, any version (producers may supply v4 or v7 ids). */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** RFC 3339 date-time with `Z` or a numeric offset (docs/api.md, `since` and `until`). */
const RFC3339_PATTERN = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * The instants the service can store and write back: years 0001 to 9999 in UTC. Postgres has no year 0,
 * and a five-digit year has no `YYYY-MM-DDTHH:mm:ss.sssZ` form; an offset can carry a timestamp written
 * inside that range outside it (`9999-12-31T23:59:59-14:00`).
 */
const EARLIEST_INSTANT_MS = Date.parse('0001-01-01T00:00:00.000Z');
const LATEST_INSTANT_MS = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * Parses an RFC 3339 timestamp to epoch milliseconds, rounding a sub-millisecond fraction up. Events are
 * stored at millisecond precision, so `t >= since` and `t < until` keep their meaning after rounding up.
 * Undefined when malformed, not a real calendar instant, or outside years 0001-9999 UTC.
 */
export function parseTimestampCeilMs(text: string): number | undefined {
  const epochMs = parseRfc3339CeilMs(text);
  if (epochMs === undefined || epochMs < EARLIEST_INSTANT_MS || epochMs > LATEST_INSTANT_MS) return undefined;
  return epochMs;
}

function parseRfc3339CeilMs(text: string): number | undefined {
  // Ingestion parses one per event, so the form producers (and this service) write is read digit by digit.
  if (text.length === 24) {
    const epochMs = parseCanonicalTimestamp(text);
    if (epochMs !== undefined) return epochMs;
  }
  const match = RFC3339_PATTERN.exec(text);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second, fraction = '', zone] = match;
  const wholeSeconds = `${year}-${month}-${day}T${hour}:${minute}:${second}${zone!.toUpperCase()}`;
  const base = Date.parse(wholeSeconds);
  if (Number.isNaN(base)) return undefined;
  // Date.parse rolls 2026-02-30 over to March; compare back to refuse impossible dates.
  const check = new Date(base + offsetMinutes(zone!) * 60_000);
  if (check.getUTCDate() !== Number(day) || check.getUTCMonth() + 1 !== Number(month)) return undefined;
  if (Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) return undefined;
  const digits = fraction.slice(1).padEnd(9, '0');
  const millis = Number(digits.slice(0, 3));
  const remainder = Number(digits.slice(3));
  return base + millis + (remainder > 0 ? 1 : 0);
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * `YYYY-MM-DDTHH:mm:ss.sssZ` without a regular expression, Date.parse or a round trip through
 * toISOString; undefined for anything else, which then takes the general path.
 */
function parseCanonicalTimestamp(text: string): number | undefined {
  if (text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 84 || text.charCodeAt(13) !== 58) return undefined;
  if (text.charCodeAt(16) !== 58 || text.charCodeAt(19) !== 46 || text.charCodeAt(23) !== 90) return undefined;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  const millisecond = digits(text, 20, 3);
  // Date.UTC reads years 0-99 as 1900-1999: those few take the general path.
  if (Math.min(hour, minute, second, millisecond) < 0 || hour > 23 || minute > 59 || second > 59) return undefined;
  if (year < 100 || month < 1 || month > 12 || day < 1) return undefined;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > DAYS_IN_MONTH[month - 1]! + (month === 2 && leap ? 1 : 0)) return undefined;
  return Date.UTC(year, month - 1, day, hour, minute, second, millisecond);
}

/** The decimal value of `length` ASCII digits at `start`, or -1 when one is not a digit. */
function digits(text: string, start: number, length: number): number {
  let value = 0;
  for (let index = start; index < start + length; index += 1) {
    const digit = text.charCodeAt(index) - 48;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

function offsetMinutes(zone: string): number {
  if (zone === 'Z' || zone === 'z') return 0;
  const sign = zone.startsWith('-') ? -1 : 1;
  const [hours, minutes] = zone.slice(1).split(':').map(Number);
  return sign * (hours! * 60 + minutes!);
}

/** The wire form of every timestamp the service writes: `YYYY-MM-DDTHH:mm:ss.SSSZ`. */
export function formatTimestamp(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

/** The first instant of the UTC month holding `epochMs`, for years 0001-0099 too (Date.UTC maps those to 19xx). */
export function monthStartMs(epochMs: number): number {
  const date = new Date(epochMs);
  const start = new Date(0);
  start.setUTCFullYear(date.getUTCFullYear(), date.getUTCMonth(), 1);
  return start.getTime();
}
