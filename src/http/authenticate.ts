import type { Middleware } from 'koa';
import type { ApiKeyVerifier, Principal } from '../auth/apiKeyVerifier.ts';
import type { PortalSessions } from '../auth/portalSessions.ts';
import type { KeyRateLimiter } from '../auth/rateLimiter.ts';
import type { Scope } from '../auth/scopes.ts';
import { ForbiddenError, RateLimitedError, UnauthorizedError } from '../platform/errors.ts';
import type { RequestState } from './state.ts';

// A portal page's calls carry its session's access token instead of a key (auth/portalSessions.ts).
const PORTAL_ACCESS_TOKEN = /^Bearer (psa_\S+)$/i;

/**
 * Every public route needs a valid key, or a portal session's access token, which the API treats as a key
 * whose scopes are the session's capabilities; the principal is then on ctx.state for logs and handlers.
 * Failed attempts are counted per client address: past the limit they get 429 (scope `auth`) instead of
 * 401. Only failures count, and a valid key is never refused for them, so a neighbour behind the same
 * NAT guessing keys cannot lock legitimate callers out.
 */
export function authenticate(
  verifier: ApiKeyVerifier,
  failureLimiter?: KeyRateLimiter,
  sessions?: PortalSessions,
): Middleware<RequestState> {
  return async (ctx, next) => {
    const authorization = ctx.get('Authorization') || undefined;
    const sessionToken = sessions && authorization ? PORTAL_ACCESS_TOKEN.exec(authorization)?.[1] : undefined;
    const check = () => (sessionToken ? sessions!.verifyAccess(sessionToken) : verifier.verify(authorization, ctx.state.clientAddress));
    const principal: Principal = await countingFailures(ctx, failureLimiter, check);
    ctx.state.principal = principal;
    ctx.state.reauthenticate = check;
    ctx.state.log = ctx.state.log.child({ tenant_id: principal.tenantId, key_lookup_id: principal.lookupId });
    await next();
  };
}

/** Runs a check of presented credentials; a 401 it throws counts against the client address's failure budget. */
export async function countingFailures<T>(
  ctx: { state: RequestState },
  failureLimiter: KeyRateLimiter | undefined,
  check: () => Promise<T>,
): Promise<T> {
  try {
    return await check();
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
}

/** 403 with the missing scope named, so the customer knows what to ask the operator for. */
export function requireScope(scope: Scope): Middleware<RequestState> {
  return async (ctx, next) => {
    const principal = ctx.state.principal;
    if (!principal?.scopes.has(scope)) {
      const caller = principal?.kind === 'portal_session' ? 'portal session' : 'key';
      throw new ForbiddenError(`This ${caller} lacks the ${scope} scope.`, scope);
    }
    await next();
  };
}
