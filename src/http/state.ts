import type { RouterContext } from '@koa/router';
import type { Principal } from '../auth/apiKeyVerifier.ts';
import type { Actor } from '../events/adminEvent.ts';
import type { Logger } from '../platform/logger.ts';

/** What the middleware chain learns about a request, in order: id and logger, then the caller. */
export interface RequestState {
  requestId: string;
  log: Logger;
  clientAddress: string;
  principal?: Principal;
  /** Checks the request's credentials again (a long-lived response ends once they are revoked). */
  reauthenticate?: () => Promise<Principal>;
}

export type AppContext = RouterContext<RequestState>;

/** The authenticated caller; routes mounted behind `authenticate` may rely on it. */
export function principalOf(ctx: { state: RequestState }): Principal {
  const principal = ctx.state.principal;
  if (!principal) throw new Error('Route mounted without authentication');
  return principal;
}

/**
 * The caller as recorded in the admin events its requests write: the key or portal session
 * (`api_key:<lookup id>`, `portal_session:pss_…`), never the person behind it.
 */
export function actorOf(ctx: AppContext): Actor {
  const principal = principalOf(ctx);
  return {
    userId: `${principal.kind}:${principal.lookupId}`,
    userRole: principal.kind,
    sourceIp: ctx.state.clientAddress,
    userAgent: ctx.get('User-Agent').slice(0, 1024),
  };
}
