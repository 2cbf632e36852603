import { once } from 'node:events';
import Koa from 'koa';
import Router from '@koa/router';
import type { Cidr } from '../platform/cidr.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { errorBoundary } from './errorBoundary.ts';
import { utf8QueryString } from './requestInput.ts';
import { requestContext } from './requestContext.ts';
import { answerWhileStarting } from './startingApp.ts';
import type { RequestState } from './state.ts';
import { httpMetrics } from './httpMetrics.ts';

export interface ReadinessCheck {
  readonly name: string;
  readonly check: () => Promise<void>;
  /**
   * False for a dependency the service can run without (Redis: limits fall back to per-instance): its
   * failure shows on /readyz as degraded but keeps the instance in rotation.
   */
  readonly critical?: boolean;
}

export interface InternalAppOptions {
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  readonly trustedProxies: readonly Cidr[];
  readonly readiness: readonly ReadinessCheck[];
  readonly features: readonly Router<RequestState>[];
  /** False while shutting down, so the load balancer stops sending traffic before the server closes. */
  readonly accepting: () => boolean;
  /** The roles are still starting: every route but health, readiness and metrics answers 503. */
  readonly starting?: boolean;
}

// /readyz answers within a second whatever a dependency does (an unreachable Postgres holds a connection
// attempt for the pool's 3 s connect timeout), so that a probe with a 1 s timeout sees a 503, not a timeout.
// The checks get 750 ms of it: at 900, a busy node's event loop (a fresh-clone CI run's) once took the answer
// to 1,020 ms.
const CHECK_TIMEOUT_MS = 750;

/** The internal port: ingestion, health, readiness and metrics; never exposed to customers. */
export function buildInternalApp(options: InternalAppOptions): Koa<RequestState> {
  const app = new Koa<RequestState>();
  app.use(requestContext(options.log.child({ port: 'internal' }), options.metrics, options.trustedProxies));
  app.use(errorBoundary(options.metrics));
  app.use(utf8QueryString());
  const router = new Router<RequestState>();

  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/readyz', async (ctx) => {
    const results = await Promise.all(
      options.readiness.map(async ({ name, check, critical = true }) => {
        try {
          const deadline = once(AbortSignal.timeout(CHECK_TIMEOUT_MS), 'abort').then(() => {
            throw new Error(`${name} did not answer within ${CHECK_TIMEOUT_MS} ms`);
          });
          await Promise.race([check(), deadline]);
          httpMetrics(options.metrics).dependencyUp.set({ dependency: name }, 1);
          return [name, { ok: true, critical }] as const;
        } catch (error) {
          httpMetrics(options.metrics).dependencyUp.set({ dependency: name }, 0);
          return [name, { ok: false, critical, error: (error as Error).message }] as const;
        }
      }),
    );
    const ready = options.accepting() && results.every(([, result]) => result.ok || !result.critical);
    const degraded = results.some(([, result]) => !result.ok);
    ctx.status = ready ? 200 : 503;
    ctx.body = {
      status: !ready ? 'not_ready' : degraded ? 'degraded' : 'ready',
      accepting: options.accepting(),
      checks: Object.fromEntries(results),
    };
  });

  router.get('/metrics', async (ctx) => {
    ctx.type = options.metrics.registry.contentType;
    ctx.body = await options.metrics.registry.metrics();
  });

  app.use(router.routes());
  for (const feature of options.features) app.use(feature.routes()).use(feature.allowedMethods());
  if (options.starting) app.use(answerWhileStarting());
  return app;
}
