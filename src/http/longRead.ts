import { finished } from 'node:stream';
import type { LongReadSlot } from '../platform/longReadSlots.ts';
import { principalOf, type AppContext } from './state.ts';

/** What admits long reads: db/longReads.ts in the service, anything with the same contract in tests. */
export interface LongReadAdmission {
  admit(tenantId: string, what: string): LongReadSlot;
}

/**
 * Takes a long-read slot for the caller's tenant (429 concurrent_exports past a cap) and holds it until the
 * response is over: sent in full, cut short, or abandoned by its client. For a route whose answer streams
 * from a connection of the long-read pool; call it once the request is known to be valid, so a request
 * that fails validation is told what is wrong rather than to wait. `onEnd` runs then too (a stream that waits
 * between writes stops waiting).
 */
export function holdLongReadSlot(ctx: AppContext, admission: LongReadAdmission, what: string, onEnd?: () => void): void {
  const slot = admission.admit(principalOf(ctx).tenantId, what);
  // finished() also calls back for a response that is already over (its client went away meanwhile).
  const cleanup = finished(ctx.res, () => {
    cleanup();
    slot.release();
    onEnd?.();
  });
}
