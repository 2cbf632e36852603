import Koa from 'koa';
import Router from '@koa/router';
import type { ApiKeyVerifier } from '../auth/apiKeyVerifier.ts';
import type { PortalSessions } from '../auth/portalSessions.ts';
import type { KeyRateLimiter } from '../auth/rateLimiter.ts';
import type { Cidr } from '../platform/cidr.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { authenticate } from './authenticate.ts';
import { errorBoundary } from './errorBoundary.ts';
import { countShortRequests, type ShortRequestCount } from './longRead.ts';
import { utf8QueryString } from './requestInput.ts';
import { buildOpenApiDocument, servedRoutes, undocumentedRoutes, type OpenApiContribution } from './openapi.ts';
import { requestContext } from './requestContext.ts';
import { trailResponseHeaders } from './trailResponseHeaders.ts';
import { reportStreamError } from './errorBoundary.ts';
import type { RequestState } from './state.ts';
import type { Middleware } from 'koa';

export const PUBLIC_PREFIX = '/api/v2/public';

export interface PublicAppOptions {
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  readonly trustedProxies: readonly Cidr[];
  readonly verifier: ApiKeyVerifier;
  /** Counts failed authentications per client address (429 `auth` past the limit). */
  readonly failureLimiter?: KeyRateLimiter;
  readonly version: string;
  /** Runs after authentication and before the routes (the per-key rate limiter). */
  readonly afterAuthentication?: readonly Middleware<RequestState>[];
  /** Feature routers mounted under the public prefix, each with its OpenAPI contribution, which must
   * document exactly the routes the router serves (the app refuses to build otherwise). */
  readonly features: ReadonlyArray<Feature>;
  /** Portal sessions: their access tokens authenticate like keys. */
  readonly portalSessions?: PortalSessions;
  /** Routes under the public prefix that take no key (the portal's link exchange), documented like the others. */
  readonly openFeatures?: ReadonlyArray<Feature>;
  /** Pages (the customer portal under /portal/, the API reference under the public prefix's docs/). */
  readonly pages?: ReadonlyArray<Router<RequestState>>;
  /** Counts the requests in flight that are not long reads, for long reads to yield to (db/longReads.ts). */
  readonly shortRequests?: ShortRequestCount;
}

interface Feature {
  readonly router: Router<RequestState>;
  readonly openapi?: OpenApiContribution;
}

/** The customer-facing API. Returns the app without listening, so tests and benchmarks can mount it. */
export function buildPublicApp(options: PublicAppOptions): Koa<RequestState> {
  const app = new Koa<RequestState>();
  app.on('error', reportStreamError(options.log));
  app.use(requestContext(options.log, options.metrics, options.trustedProxies));
  app.use(trailResponseHeaders());
  app.use(errorBoundary(options.metrics));

  const features = [...(options.openFeatures ?? []), ...options.features];
  const drift = features.flatMap((feature) => undocumentedRoutes(servedRoutes(feature.router), feature.openapi ?? { paths: {} }));
  if (drift.length > 0) throw new Error(`the public API and its OpenAPI document disagree: ${drift.join('; ')}`);
  const openapi = JSON.stringify(
    buildOpenApiDocument(
      options.version,
      features.flatMap((feature) => (feature.openapi ? [feature.openapi] : [])),
    ),
  );
  const documentation = new Router<RequestState>({ prefix: PUBLIC_PREFIX });
  documentation.get('/openapi.json', (ctx) => {
    ctx.type = 'application/json';
    ctx.body = openapi;
  });
  app.use(documentation.routes());
  for (const pages of options.pages ?? []) app.use(pages.routes());
  const open = new Router<RequestState>({ prefix: PUBLIC_PREFIX });
  for (const feature of options.openFeatures ?? []) open.use(feature.router.routes(), feature.router.allowedMethods());
  app.use(open.routes());

  const api = new Router<RequestState>({ prefix: PUBLIC_PREFIX });
  api.use(authenticate(options.verifier, options.failureLimiter, options.portalSessions));
  // From authentication on: a request without a valid key cannot hold long reads back.
  if (options.shortRequests) api.use(countShortRequests(options.shortRequests));
  for (const middleware of options.afterAuthentication ?? []) api.use(middleware);
  // After authentication: a caller without a valid key learns nothing but 401.
  api.use(utf8QueryString());
  for (const feature of options.features) api.use(feature.router.routes(), feature.router.allowedMethods());
  app.use(api.routes());
  app.use(api.allowedMethods());
  return app;
}
