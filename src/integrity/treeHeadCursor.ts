import { SignedCursor, invalidCursor } from '../events/cursor.ts';

/**
 * Page cursors of the tree-head history, signed like the event list's under a key of their own: the text
 * carries the signed_at of the page's last head, and the MAC also covers the tenant and the time window.
 */
export class TreeHeadCursor {
  private readonly signed: SignedCursor;

  constructor(pepper: string) {
    this.signed = new SignedCursor(pepper, 'tree-head-cursor-v1');
  }

  encode(signedAtMs: number, tenantId: string, window: string): string {
    return this.signed.encode(`1:${signedAtMs}`, `${tenantId}\n${window}`);
  }

  decode(cursor: string, tenantId: string, window: string): number {
    const [version, millis] = (this.signed.decode(cursor, `${tenantId}\n${window}`) ?? '').split(':');
    const signedAtMs = Number(millis);
    if (version !== '1' || !Number.isSafeInteger(signedAtMs)) throw invalidCursor();
    return signedAtMs;
  }
}
