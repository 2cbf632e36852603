import { PortalSessions } from '../auth/portalSessions.ts';
import { PrepaidReads } from '../auth/prepaidReads.ts';
import { requireSetting } from '../config/config.ts';
import { apiReferencePages } from '../http/apiReferencePages.ts';
import { portalPages } from '../http/portalPages.ts';
import { buildPublicApp } from '../http/publicApp.ts';
import { rateLimit } from '../http/rateLimit.ts';
import { redactionRoutes } from '../http/routes/redactions.ts';
import { TILE_PATHS } from '../http/routes/transparencyLog.ts';
import { portalBrowserOpenApi, portalBrowserRoutes, portalSessionRoutes, portalSessionsOpenApi } from '../http/routes/portalSessions.ts';
import { SERVICE_VERSION } from '../platform/version.ts';
import type { ApiFeature, Feature } from './api/apiFeature.ts';
import { rateLimiterOf, startKeyVerifier } from './api/keysAndLimits.ts';
import { trailFeatures } from './api/trailFeatures.ts';
import { webhookFeatures } from './api/webhookFeatures.ts';
import type { Role } from './role.ts';
import type { SharedParts } from './sharedParts.ts';

/**
 * The features of the public API, in mounting order (a route of an earlier one wins): each module opens
 * what its routes need and contributes them with their OpenAPI paths (roles/api/).
 */
const FEATURES: readonly ApiFeature[] = [trailFeatures, webhookFeatures];

type Portal = Parameters<typeof portalSessionRoutes>[0];

/** The public API and the customer portal, on PORT. */
export const role: Role = {
  behindService: true,
  startsWithoutPostgres: true,
  servesPublicPort: true,
  async start(parts) {
    const { config, log, metrics } = parts;
    const pepper = requireSetting(config.keyPepper, 'KEY_PEPPER', 'the api role');
    const verifier = await startKeyVerifier(parts, pepper);
    const { limiter, readiness } = rateLimiterOf(parts);
    const portalSessions = new PortalSessions({ db: parts.db, writer: await parts.writer(), pepper });
    const portal: Portal = { sessions: portalSessions, publicBaseUrl: config.publicBaseUrl, failureLimiter: limiter };
    const app = buildPublicApp({
      log,
      metrics,
      trustedProxies: config.trustedProxies,
      verifier,
      failureLimiter: limiter,
      afterAuthentication: parts.rateLimiting ? [rateLimit(limiter, { reads: new PrepaidReads(limiter), paths: TILE_PATHS })] : [],
      version: SERVICE_VERSION,
      portalSessions,
      openFeatures: [{ router: portalBrowserRoutes(portal), openapi: portalBrowserOpenApi }],
      pages: [portalPages({ frameAncestors: config.portalFrameAncestors, log }), apiReferencePages({ log })],
      shortRequests: parts.longReads().shortRequests,
      features: [{ router: portalSessionRoutes(portal), openapi: portalSessionsOpenApi }, ...(await featuresOf(parts, pepper))],
    });
    // Operators' redactions on the internal port, only where operator tokens are configured.
    const internalRoutes = config.operatorTokens ? [redactionRoutes(await parts.writer(), config.operatorTokens)] : [];
    return { readiness, publicHandler: app.callback(), internalRoutes };
  },
};

/** Opens the features one after another (each may register releasers, in order). */
async function featuresOf(parts: SharedParts, pepper: string): Promise<Feature[]> {
  const features: Feature[] = [];
  for (const feature of FEATURES) features.push(...(await feature(parts, pepper)));
  return features;
}
