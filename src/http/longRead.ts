import { finished } from 'node:stream';
import type { Middleware } from 'koa';
import type { LongReadSlot } from '../platform/longReadSlots.ts';
import type { LongReadPace } from '../platform/longReadDutyCycle.ts';
import type { LongReadTurns, ShortRequestEnd } from '../platform/longReadYield.ts';
import { principalOf, type AppContext, type RequestState } from './state.ts';

/** What admits long reads: db/longReads.ts in the service, anything with the same contract in tests. */
export interface LongReadAdmission {
  admit(tenantId: string, what: string): LongReadSlot;
}

/** Long reads that yield to short requests (exports): db/longReads.ts in the service. */
export interface YieldingLongReads extends LongReadAdmission {
  turns(): LongReadTurns & LongReadPace;
}

/** Where short requests are counted, for long reads to yield to (platform/longReadYield.ts). */
export interface ShortRequestCount {
  shortRequest(): (ended?: ShortRequestEnd) => void;
}

/**
 * Counts an authenticated request as a short request until it is answered, or until it turns out to be a
 * long read (holdLongReadSlot): an export must not wait for itself, nor for another export, only for the
 * lists, lookups and writes beside it.
 */
export function countShortRequests(count: ShortRequestCount): Middleware<RequestState> {
  return async (ctx, next) => {
    const end = count.shortRequest();
    ctx.state.endShortRequest = () => end('long read');
    try {
      await next();
    } finally {
      end();
    }
  };
}

/**
 * Takes a long-read slot for the caller's tenant (429 concurrent_exports past a cap) and holds it until the
 * response is over: sent in full, cut short, or abandoned by its client. For a route whose answer streams
 * from a connection of the long-read pool; call it once the request is known to be valid, so a request
 * that fails validation is told what is wrong rather than to wait. `onEnd` runs then too (a stream that waits
 * between writes stops waiting).
 */
export function holdLongReadSlot(ctx: AppContext, admission: LongReadAdmission, what: string, onEnd?: () => void): void {
  // Before admission: an export refused with 429 is no short traffic either, for exports to slow down for.
  ctx.state.endShortRequest?.();
  const slot = admission.admit(principalOf(ctx).tenantId, what);
  // finished() also calls back for a response that is already over (its client went away meanwhile).
  const cleanup = finished(ctx.res, () => {
    cleanup();
    slot.release();
    onEnd?.();
  });
}
