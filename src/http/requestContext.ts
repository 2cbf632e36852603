import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import { clientAddress } from '../auth/clientAddress.ts';
import type { Cidr } from '../platform/cidr.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import type { RequestState } from './state.ts';
import { httpMetrics } from './httpMetrics.ts';

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The route template a request matched (`/audit/streams/:id`), from the router's matched layers: the last
 * one that is a route (it has methods), not a middleware. The router's own `_matchedRoute` is the layer that
 * ran last, which for a request refused before its route (a 401 by the authentication middleware) is that
 * middleware's path, a regular expression; as a label it named no route and its text was the router's.
 */
function routeTemplate(matched: ReadonlyArray<{ path: string | RegExp; methods: readonly string[] }> | undefined): string {
  const route = matched?.findLast((layer) => layer.methods.length > 0 && typeof layer.path === 'string');
  return route ? (route.path as string) : 'unmatched';
}

/**
 * First middleware of every app: a request id (the caller's if it is sane), a logger scoped to it, the
 * client address, duration metrics labelled by route template (never by raw path, which would explode
 * the label set), and one access log line without headers or bodies.
 */
export function requestContext(log: Logger, metrics: ServiceMetrics, trustedProxies: readonly Cidr[]): Middleware<RequestState> {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const incoming = ctx.get('X-Request-Id');
    const requestId = REQUEST_ID_PATTERN.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.state.clientAddress = clientAddress(ctx.req.socket.remoteAddress, ctx.get('X-Forwarded-For') || undefined, trustedProxies);
    ctx.state.log = log.child({ request_id: requestId });
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const routeLabel = routeTemplate(ctx.matched);
      httpMetrics(metrics).requestDuration.observe({ route: routeLabel, method: ctx.method, status: String(ctx.status) }, seconds);
      // After authentication the scoped logger already carries tenant_id and key_lookup_id.
      ctx.state.log.info(
        { method: ctx.method, route: routeLabel, status: ctx.status, duration_ms: Math.round(seconds * 10_000) / 10 },
        'request',
      );
    }
  };
}
