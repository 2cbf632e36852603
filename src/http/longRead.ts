import { finished } from 'node:stream';
import type { Middleware } from 'koa';
import type { LongReadSlot } from '../platform/longReadSlots.ts';
import type { LongReadPace } from '../platform/longReadDutyCycle.ts';
import type { LongReadTurns } from '../platform/longReadYield.ts';
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
  shortRequest(): () => void;
}

/**
 * Marks a route as a long read: put it first on the route (`router.post(path, longReadRoute, …)`). It does
 * nothing itself; countShortRequests finds it on the route the request matched, before the route runs.
 */
export const longReadRoute: Middleware<RequestState> = (_ctx, next) => next();

/** The route layers a request matched (@koa/router sets them before any of the router's middleware runs). */
interface MatchedRoutes {
  readonly method: string;
  readonly matched?: ReadonlyArray<{ readonly methods: readonly string[]; readonly stack: readonly unknown[] }>;
}

function matchesLongReadRoute(ctx: MatchedRoutes): boolean {
  return (ctx.matched ?? []).some((layer) => layer.methods.includes(ctx.method) && layer.stack.includes(longReadRoute));
}

/**
 * Counts an authenticated request as a short request until it is answered, unless its route is a long read
 * (longReadRoute): an export must not wait for itself, nor for another export, only for the lists, lookups
 * and writes beside it. Told apart by the route, not by admission: an export request is no short traffic
 * while its body arrives, the rate limiter answers or it is refused with 429 either, and a client sending
 * its body slowly held every running export to the duty cycle for as long as it liked.
 */
export function countShortRequests(count: ShortRequestCount): Middleware<RequestState> {
  return async (ctx, next) => {
    if (matchesLongReadRoute(ctx)) return next();
    const end = count.shortRequest();
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
  const slot = admission.admit(principalOf(ctx).tenantId, what);
  // finished() also calls back for a response that is already over (its client went away meanwhile).
  const cleanup = finished(ctx.res, () => {
    cleanup();
    slot.release();
    onEnd?.();
  });
}
