import type { DeclaredHold } from '../lifecycle/legalHolds.ts';
import type { LegalHoldRecord } from '../lifecycle/legalHoldStore.ts';
import type { Health } from './conditions.ts';
import type { LegalHoldSpec } from './lifecycleKinds.ts';

/**
 * What a LegalHold resource asks for and shows, decided without I/O (legalHoldReconciler.ts places, releases
 * and reports). Placing once and releasing once are the store's (lifecycle/legalHolds.ts): each reads and
 * writes under one transaction's lock, which no decision taken outside it could replace without a race.
 */

/** The hold the spec declares: absent bounds are open (from the first event, up to the last and beyond). */
export function declaredHold(spec: LegalHoldSpec): DeclaredHold {
  return {
    tenantId: spec.tenantId,
    since: spec.since ? new Date(spec.since) : null,
    until: spec.until ? new Date(spec.until) : null,
    actionPrefixes: spec.actionPrefixes ?? [],
    reason: spec.reason,
    reference: spec.reference,
  };
}

/** status and health of a hold in place. */
export function holding(hold: LegalHoldRecord): { readonly status: { holdId: string; placedAt: string }; readonly health: Health } {
  return {
    status: { holdId: hold.id, placedAt: hold.placedAt.toISOString() },
    health: {
      state: 'Ready',
      reason: 'Holding',
      message: `Legal hold ${hold.id} keeps the matching events of tenant ${hold.tenantId}, whatever the retention policy.`,
    },
  };
}
