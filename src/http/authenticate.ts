import type { Middleware } from 'koa';
import type { ApiKeyVerifier } from '../auth/apiKeyVerifier.ts';
import type { KeyRateLimiter } from '../auth/rateLimiter.ts';
import type { Scope } from '../auth/scopes.ts';
import { ForbiddenError, RateLimitedError, UnauthorizedError } from '../platform/errors.ts';
import type { RequestState } from './state.ts';

/**
 * Every public route needs a valid key; the principal is then on ctx.state for logs and handlers.
 * Failed attempts are counted per client address: past the limit they get 429 (scope `auth`) instead of
 * 401. Only failures count, and a valid key is never refused for them, so a neighbour behind the same
 * NAT guessing keys cannot lock legitimate callers out.
 */
export function authenticate(verifier: ApiKeyVerifier, failureLimiter?: KeyRateLimiter): Middleware<RequestState> {
  return async (ctx, next) => {
    let principal: Awaited<ReturnType<ApiKeyVerifier['verify']>>;
    try {
      principal = await verifier.verify(ctx.get('Authorization') || undefined, ctx.state.clientAddress);
    } catch (error) {
      if (error instanceof UnauthorizedError && failureLimiter) {
        const decision = await failureLimiter.consume('auth', ctx.state.clientAddress || 'unknown');
        if (!decision.allowed) {
          ctx.state.log.warn({ client_address: ctx.state.clientAddress }, 'too many failed authentications');
          throw new RateLimitedError('auth', decision.resetSeconds);
        }
      }
      throw error;
    }
    ctx.state.principal = principal;
    ctx.state.log = ctx.state.log.child({ tenant_id: principal.tenantId, key_lookup_id: principal.lookupId });
    await next();
  };
}

/** 403 with the missing scope named, so the customer knows what to ask the operator for. */
export function requireScope(scope: Scope): Middleware<RequestState> {
  return async (ctx, next) => {
    if (!ctx.state.principal?.scopes.has(scope)) {
      throw new ForbiddenError(`This key lacks the ${scope} scope.`, scope);
    }
    await next();
  };
}
