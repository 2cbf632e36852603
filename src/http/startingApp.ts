import Koa, { type Middleware } from 'koa';
import type { Cidr } from '../platform/cidr.ts';
import { ServiceUnavailableError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { errorBoundary } from './errorBoundary.ts';
import { requestContext } from './requestContext.ts';
import type { RequestState } from './state.ts';
import { trailResponseHeaders } from './trailResponseHeaders.ts';

/**
 * What a port answers while the process's roles start (which may mean waiting for Postgres): 503 with
 * `Retry-After`, never the 404 of a route not registered yet. A producer treats a 4xx as final and drops
 * the batch; a 503 it retries (docs/operations.md "Starting").
 */
export function answerWhileStarting(): Middleware<RequestState> {
  return () => {
    throw new ServiceUnavailableError('The service is starting; retry after Retry-After seconds.');
  };
}

/** The public port until the api role has started: every request answered by answerWhileStarting. */
export function buildStartingPublicApp(options: {
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  readonly trustedProxies: readonly Cidr[];
}): Koa<RequestState> {
  const app = new Koa<RequestState>();
  app.use(requestContext(options.log, options.metrics, options.trustedProxies));
  app.use(trailResponseHeaders());
  app.use(errorBoundary(options.metrics));
  app.use(answerWhileStarting());
  return app;
}
