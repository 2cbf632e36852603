import type { Middleware } from 'koa';
import {
  AppError,
  RateLimitedError,
  ServiceUnavailableError,
  TooManyLongReadsError,
  UnauthorizedError,
  coerceError,
} from '../platform/errors.ts';
import { BoundedWarnings } from '../platform/boundedWarnings.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import type { RequestState } from './state.ts';

/** Byte-identical for every cause (docs/api.md "Errors"): missing, malformed, unknown, revoked. */
const UNAUTHORIZED_BODY = '{"error":"unauthorized"}';

/**
 * The one place errors become responses. AppErrors carry their status and code; Koa's own HTTP errors
 * (unknown route, wrong method) keep their status; anything else is a generic 500 that reveals nothing
 * but the request id, and is logged with its stack.
 */
export function errorBoundary(metrics?: ServiceMetrics): Middleware<RequestState> {
  // A dependency that refuses one request refuses the ones after it too: one line per kind every 10 s.
  const unavailable = new BoundedWarnings();
  return async (ctx, next) => {
    try {
      await next();
      // What the router answers without a body (unknown path, a method the path does not have, a method
      // nobody implements) gets the JSON error shape like every other error.
      if (ctx.body == null && ctx.status >= 400) respondWithoutError(ctx);
    } catch (thrown) {
      const error = coerceError(thrown);
      if (error instanceof UnauthorizedError) {
        ctx.state.log.info({ reason: error.message }, 'authentication failed');
        ctx.status = 401;
        ctx.set('WWW-Authenticate', 'Bearer');
        ctx.type = 'application/json';
        ctx.body = UNAUTHORIZED_BODY;
        return;
      }
      if (error instanceof RateLimitedError) {
        ctx.set('Retry-After', String(error.retryAfterSeconds));
        respond(ctx, 429, { error: error.code, scope: error.scope, retry_after_s: error.retryAfterSeconds });
        return;
      }
      if (error instanceof AppError) {
        // Producers and the client retry a 503 (and a refused export) no sooner than this.
        if (error instanceof ServiceUnavailableError || error instanceof TooManyLongReadsError) {
          ctx.set('Retry-After', String(error.retryAfterSeconds));
        }
        if (error.status >= 500) {
          const cause = (error.cause ?? error) as { code?: unknown };
          unavailable.warn(ctx.state.log, `${error.code} ${String(cause.code ?? '')}`, { err: error.cause ?? error }, error.message);
          metrics?.errors.inc({ kind: 'dependency_unavailable' });
        }
        respond(ctx, error.status, { error: error.code, message: error.message, ...error.bodyExtras() });
        return;
      }
      const status = httpErrorStatus(error);
      if (status !== undefined && status < 500) {
        respond(ctx, status, { error: codeForStatus(status), message: error.message });
        return;
      }
      ctx.state.log.error({ err: error }, 'unhandled error');
      metrics?.errors.inc({ kind: 'http_5xx' });
      respond(ctx, 500, {
        error: 'internal_error',
        message: 'Internal server error. Quote the request id when reporting it.',
        request_id: ctx.state.requestId,
      });
    }
  };
}

/**
 * Koa emits 'error' for what happens after the headers went out: a streamed export whose client hung up
 * (expected, debug) or whose source failed (the response was cut short on purpose, warn). Without a
 * listener Koa would print these to stderr.
 */
export function reportStreamError(log: Logger): (error: Error) => void {
  return (error) => {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ERR_STREAM_PREMATURE_CLOSE') {
      log.debug({ code }, 'client went away during a streamed response');
    } else {
      log.warn({ err: error }, 'streamed response aborted');
    }
  };
}

function respond(ctx: { status: number; type: string; body: unknown }, status: number, body: Record<string, unknown>): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(body);
}

/** Koa and its middleware throw http-errors objects that carry a numeric status and an expose flag. */
function httpErrorStatus(error: Error): number | undefined {
  const candidate = error as Error & { status?: unknown; expose?: unknown };
  return typeof candidate.status === 'number' && candidate.expose === true ? candidate.status : undefined;
}

function respondWithoutError(ctx: { status: number; method: string; type: string; body: unknown }): void {
  switch (ctx.status) {
    case 404:
      respond(ctx, 404, { error: 'not_found', message: 'No such route.' });
      return;
    case 405:
      respond(ctx, 405, { error: 'method_not_allowed', message: `${ctx.method} is not allowed here; see the Allow header.` });
      return;
    case 501:
      respond(ctx, 501, { error: 'not_implemented', message: `The method ${ctx.method} is not supported.` });
      return;
    default:
      respond(ctx, ctx.status, { error: codeForStatus(ctx.status), message: 'The request failed.' });
      return;
  }
}

function codeForStatus(status: number): string {
  switch (status) {
    case 404:
      return 'not_found';
    case 405:
      return 'method_not_allowed';
    case 413:
      return 'payload_too_large';
    case 501:
      return 'not_implemented';
    default:
      return status >= 500 ? 'internal_error' : 'bad_request';
  }
}
