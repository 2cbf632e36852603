import { createHash, timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import { UnauthorizedError } from '../platform/errors.ts';
import type { RequestState } from './state.ts';

/**
 * Lets a request of the internal port through when it carries one of `tokens` as its bearer: the ingest
 * tokens for producers, the operator tokens for operators' actions. Every token is compared, in constant
 * time over their digests, so that the time taken does not say which one matched or how much of one.
 */
export function requireBearerToken(tokens: readonly string[], what: string): Middleware<RequestState> {
  const digests = tokens.map(digest);
  return async (ctx, next) => {
    const match = /^Bearer (\S+)$/.exec(ctx.get('Authorization'));
    const presented = digest(match?.[1] ?? '');
    const allowed = digests.reduce((found, token) => timingSafeEqual(token, presented) || found, false);
    if (!match || !allowed) throw new UnauthorizedError(`${what} missing or unknown`);
    await next();
  };
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}
