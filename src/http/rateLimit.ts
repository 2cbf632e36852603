import type { Middleware } from 'koa';
import type { PrepaidReads } from '../auth/prepaidReads.ts';
import type { Bucket, KeyRateLimiter, LimitDecision } from '../auth/rateLimiter.ts';
import { RateLimitedError } from '../platform/errors.ts';
import { principalOf, type RequestState } from './state.ts';

/** GET (and HEAD) spend the read budget; POST, PATCH and DELETE, export included, the write budget. */
function bucketFor(method: string): Bucket {
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write';
}

/** Reads paid for in blocks (auth/prepaidReads.ts): the GETs whose path this matches. */
export interface PrepaidRoutes {
  readonly reads: PrepaidReads;
  readonly paths: RegExp;
}

/**
 * Per-key limits (never per tenant: two keys of one tenant have independent budgets). Every
 * authenticated response carries the RateLimit-* headers; a refused one also Retry-After.
 */
export function rateLimit(limiter: KeyRateLimiter, prepaid?: PrepaidRoutes): Middleware<RequestState> {
  return async (ctx, next) => {
    const bucket = bucketFor(ctx.method);
    const lookupId = principalOf(ctx).lookupId;
    const decision =
      prepaid && bucket === 'read' && prepaid.paths.test(ctx.path)
        ? await prepaid.reads.consume(lookupId)
        : await limiter.consume(bucket, lookupId);
    setRateLimitHeaders(ctx, decision);
    if (!decision.allowed) throw new RateLimitedError(bucket, decision.resetSeconds);
    await next();
  };
}

function setRateLimitHeaders(ctx: { set(field: string, value: string): void }, decision: LimitDecision): void {
  ctx.set('RateLimit-Limit', String(decision.limit));
  ctx.set('RateLimit-Remaining', String(decision.remaining));
  ctx.set('RateLimit-Reset', String(decision.resetSeconds));
}
