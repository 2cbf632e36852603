import type { Middleware } from 'koa';
import type { ApiKeyVerifier } from '../auth/apiKeyVerifier.ts';
import type { Scope } from '../auth/scopes.ts';
import { ForbiddenError } from '../platform/errors.ts';
import type { RequestState } from './state.ts';

/** Every public route needs a valid key; the principal is then on ctx.state for logs and handlers. */
export function authenticate(verifier: ApiKeyVerifier): Middleware<RequestState> {
  return async (ctx, next) => {
    const principal = await verifier.verify(ctx.get('Authorization') || undefined, ctx.state.clientAddress);
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
