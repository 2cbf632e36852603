import { createHmac, createSecretKey, hkdfSync, timingSafeEqual, type KeyObject } from 'node:crypto';
import { ValidationError } from '../platform/errors.ts';
import { UUID_PATTERN } from './eventFields.ts';
import { canonicalFilters, type EventFilters } from './eventFilters.ts';

/** The position after which the next page starts: the last returned event in list order. */
export interface CursorPosition {
  readonly occurredAtMs: number;
  readonly eventId: string;
}

const MAC_BYTES = 16;

/**
 * Opaque, authenticated page cursors (docs/api.md "Paging"). The text carries only the position; the
 * MAC also covers the tenant and the filters, so a cursor edited by hand, issued to another tenant or
 * replayed under other filters fails verification and is a 422 rather than a silently wrong page.
 */
export class CursorCodec {
  private readonly key: KeyObject;

  constructor(pepper: string) {
    // A key of its own, derived from the pepper, so cursor MACs can never be confused with key hashes.
    // Held as a KeyObject: createHmac imports a Buffer or string key anew on every call, which costs several
    // times the MAC itself on the list's hot path.
    this.key = createSecretKey(Buffer.from(hkdfSync('sha256', pepper, 'audit-trail', 'page-cursor-v1', 32)));
  }

  encode(position: CursorPosition, tenantId: string, filters: EventFilters): string {
    const payload = Buffer.from(`1:${position.occurredAtMs}:${position.eventId}`).toString('base64url');
    return `${payload}.${this.mac(payload, tenantId, filters).toString('base64url')}`;
  }

  decode(cursor: string, tenantId: string, filters: EventFilters): CursorPosition {
    const invalid = () => ValidationError.single('cursor', 'is not a cursor issued for this query; start again without it');
    const [payload, macText, ...rest] = cursor.split('.');
    if (!payload || !macText || rest.length > 0 || cursor.length > 200) throw invalid();
    const given = Buffer.from(macText, 'base64url');
    const expected = this.mac(payload, tenantId, filters);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
    const [version, millis, eventId] = Buffer.from(payload, 'base64url').toString('utf8').split(':');
    const occurredAtMs = Number(millis);
    if (version !== '1' || !Number.isSafeInteger(occurredAtMs) || !eventId || !UUID_PATTERN.test(eventId)) throw invalid();
    return { occurredAtMs, eventId };
  }

  private mac(payload: string, tenantId: string, filters: EventFilters): Buffer {
    return createHmac('sha256', this.key)
      .update(`${tenantId}\n${canonicalFilters(filters)}\n${payload}`)
      .digest()
      .subarray(0, MAC_BYTES);
  }
}
