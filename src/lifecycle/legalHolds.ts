import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/database.ts';
import { adminEvent, type Actor } from '../events/adminEvent.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { findManagedLegalHold, insertLegalHold, releaseLegalHold, type LegalHoldRecord } from './legalHoldStore.ts';

/** What a LegalHold resource declares. */
export interface DeclaredHold {
  readonly tenantId: string;
  readonly since: Date | null;
  readonly until: Date | null;
  readonly actionPrefixes: readonly string[];
  readonly reason: string;
  readonly reference: string;
}

export interface LegalHoldsOptions {
  readonly db: Queryable;
  /** Placing and releasing, each with its admin.legal_hold.* event in one transaction. */
  readonly writer: EventWriter;
}

/**
 * Legal holds: placed once per resource, never changed, released once (the row stays, with when and by whom).
 * Placing and releasing are events in the tenant's own trail (admin.legal_hold.place, .release), written in
 * the transaction that does them, so the trail shows exactly when its events were frozen and freed.
 */
export class LegalHolds {
  private readonly options: LegalHoldsOptions;

  constructor(options: LegalHoldsOptions) {
    this.options = options;
  }

  /** The resource's hold, placed now if it has none: `placed` says whether this call placed it. */
  place(declared: DeclaredHold, managedBy: string, actor: Actor): Promise<{ hold: LegalHoldRecord; placed: boolean }> {
    return this.options.writer.recordWith<{ hold: LegalHoldRecord; placed: boolean }>('internal', async (client) => {
      const existing = await findManagedLegalHold(client, managedBy);
      if (existing) return { result: { hold: existing, placed: false }, events: [] };
      const id = `hold_${randomBytes(16).toString('hex')}`;
      const hold = await insertLegalHold(client, { id, ...declared, managedBy });
      // Another process placed it between our read and insert (the resource lock makes this rare).
      if (!hold) return { result: { hold: (await findManagedLegalHold(client, managedBy))!, placed: false }, events: [] };
      return { result: { hold, placed: true }, events: [holdEvent('admin.legal_hold.place', hold, actor)] };
    });
  }

  /** Releases the resource's hold; undefined when it placed none. Releasing twice changes nothing. */
  release(managedBy: string, actor: Actor): Promise<LegalHoldRecord | undefined> {
    return this.options.writer.recordWith<LegalHoldRecord | undefined>('internal', async (client) => {
      const hold = await findManagedLegalHold(client, managedBy, true);
      if (!hold || hold.releasedAt) return { result: hold, events: [] };
      const released = await releaseLegalHold(client, hold.id, actor.userId);
      return { result: released, events: [holdEvent('admin.legal_hold.release', released, actor)] };
    });
  }
}

/** What the trail records of a hold: its scope and its reference, which auditors look up. */
function holdEvent(action: string, hold: LegalHoldRecord, actor: Actor) {
  return adminEvent({
    tenantId: hold.tenantId,
    action,
    actor,
    resourceType: 'legal_hold',
    resourceId: hold.id,
    details: {
      since: hold.since?.toISOString() ?? null,
      until: hold.until?.toISOString() ?? null,
      action_prefixes: hold.actionPrefixes,
      reason: hold.reason,
      reference: hold.reference,
      ...(hold.releasedAt ? { placed_at: hold.placedAt.toISOString() } : {}),
    },
  });
}
