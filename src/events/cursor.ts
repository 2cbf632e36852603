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
const MAX_CURSOR_LENGTH = 200;

/**
 * The text form of opaque, authenticated cursors: a base64url payload and a MAC that also covers what the
 * cursor is bound to (the tenant, the query), under a key of the cursor's own kind derived from the
 * pepper. A cursor edited by hand, issued to another tenant, replayed under another query or taken from
 * another kind of list fails verification.
 */
export class SignedCursor {
  private readonly key: KeyObject;

  constructor(pepper: string, purpose: string) {
    // A key of its own, derived from the pepper, so cursor MACs can never be confused with key hashes.
    // Held as a KeyObject: createHmac imports a Buffer or string key anew on every call, which costs several
    // times the MAC itself on the list's hot path.
    this.key = createSecretKey(Buffer.from(hkdfSync('sha256', pepper, 'audit-trail', purpose, 32)));
  }

  encode(payload: string, binding: string): string {
    const text = Buffer.from(payload).toString('base64url');
    return `${text}.${this.mac(text, binding).toString('base64url')}`;
  }

  /** The payload, or undefined when the cursor is not one this codec issued for this binding. */
  decode(cursor: string, binding: string): string | undefined {
    const [text, macText, ...rest] = cursor.split('.');
    if (!text || !macText || rest.length > 0 || cursor.length > MAX_CURSOR_LENGTH) return undefined;
    const given = Buffer.from(macText, 'base64url');
    const expected = this.mac(text, binding);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    return Buffer.from(text, 'base64url').toString('utf8');
  }

  private mac(text: string, binding: string): Buffer {
    return createHmac('sha256', this.key).update(`${binding}\n${text}`).digest().subarray(0, MAC_BYTES);
  }
}

/** A 422 for a cursor that does not belong to the query it came with. */
export function invalidCursor(): ValidationError {
  return ValidationError.single('cursor', 'is not a cursor issued for this query; start again without it');
}

/**
 * Page cursors of the event list (docs/api.md "Paging"). The text carries only the position; the MAC also
 * covers the tenant and the filters, so a cursor replayed under other filters is a 422 rather than a
 * silently wrong page.
 */
export class CursorCodec {
  private readonly signed: SignedCursor;

  constructor(pepper: string) {
    this.signed = new SignedCursor(pepper, 'page-cursor-v1');
  }

  encode(position: CursorPosition, tenantId: string, filters: EventFilters): string {
    return this.signed.encode(`1:${position.occurredAtMs}:${position.eventId}`, `${tenantId}\n${canonicalFilters(filters)}`);
  }

  decode(cursor: string, tenantId: string, filters: EventFilters): CursorPosition {
    const payload = this.signed.decode(cursor, `${tenantId}\n${canonicalFilters(filters)}`);
    const [version, millis, eventId] = (payload ?? '').split(':');
    const occurredAtMs = Number(millis);
    if (version !== '1' || !Number.isSafeInteger(occurredAtMs) || !eventId || !UUID_PATTERN.test(eventId)) throw invalidCursor();
    return { occurredAtMs, eventId };
  }
}
