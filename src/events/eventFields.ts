/**
 * Field rules shared by ingestion, the read filters and webhook filters, so that a value the API accepts
 * as a filter is one that an event could actually carry.
 */

/** Dotted lowercase slug: `phi.read`, `admin.key.create`. */
export const ACTION_PATTERN = /^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$/;
export const ACTION_MAX_LENGTH = 128;

/** Tenant ids appear in NATS subjects (`audit.ingest.<tenant_id>`), so no dots, spaces or wildcards. */
export const TENANT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export const RESOURCE_TYPE_MAX_LENGTH = 128;
export const IDENTIFIER_MAX_LENGTH = 256;

/** Canonical UUID text, any version (producers may supply v4 or v7 ids). */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** RFC 3339 date-time with `Z` or a numeric offset (DESIGN.md §2 "Time"). */
const RFC3339_PATTERN = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Parses an RFC 3339 timestamp to epoch milliseconds, rounding a sub-millisecond fraction up. Events are
 * stored at millisecond precision, so `t >= since` and `t < until` keep their meaning after rounding up.
 * Undefined when malformed or not a real calendar instant.
 */
export function parseTimestampCeilMs(text: string): number | undefined {
  // Fast path for the form producers (and this service) write: a round trip through toISOString proves it
  // is a real calendar instant. Ingestion parses one per event, so this is on the hot path.
  if (text.length === 24 && text.charCodeAt(23) === 90 /* Z */) {
    const epochMs = Date.parse(text);
    if (!Number.isNaN(epochMs) && new Date(epochMs).toISOString() === text) return epochMs;
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
