import { ApiKeyVerifier } from '../auth/apiKeyVerifier.ts';
import { PortalSessions } from '../auth/portalSessions.ts';
import { KeyRateLimiter } from '../auth/rateLimiter.ts';
import { connectRedis } from '../auth/redisConnection.ts';
import { requireSetting } from '../config/config.ts';
import { DeliveryCursorCodec } from '../delivery/deliveryCursor.ts';
import { WebhookDeliveries } from '../delivery/deliveryOperations.ts';
import { TestDeliveries } from '../delivery/testDelivery.ts';
import { WebhookSender } from '../delivery/webhookSender.ts';
import { CursorCodec } from '../events/cursor.ts';
import { EXPORT_ROW_CAP, EventExporter } from '../events/eventExport.ts';
import { EventReader } from '../events/eventReader.ts';
import type { ReadinessCheck } from '../http/internalApp.ts';
import { apiReferencePages } from '../http/apiReferencePages.ts';
import { portalPages } from '../http/portalPages.ts';
import { buildPublicApp, type PublicAppOptions } from '../http/publicApp.ts';
import { rateLimit } from '../http/rateLimit.ts';
import { eventRoutes, eventsOpenApi } from '../http/routes/events.ts';
import { exportOpenApi, exportRoutes } from '../http/routes/export.ts';
import { liveOpenApi, liveRoutes } from '../http/routes/live.ts';
import { integrityOpenApi, integrityRoutes } from '../http/routes/integrity.ts';
import { transparencyLogOpenApi, transparencyLogRoutes } from '../http/routes/transparencyLog.ts';
import { retentionOpenApi, retentionRoutes } from '../http/routes/retention.ts';
import { redactionRoutes } from '../http/routes/redactions.ts';
import { portalBrowserOpenApi, portalBrowserRoutes, portalSessionRoutes, portalSessionsOpenApi } from '../http/routes/portalSessions.ts';
import { webhookDeliveriesOpenApi, webhookDeliveryRoutes } from '../http/routes/webhookDeliveries.ts';
import { webhookHealthOpenApi, webhookHealthRoutes } from '../http/routes/webhookHealth.ts';
import { webhookRoutes } from '../http/routes/webhooks.ts';
import { operationalEventRoutes, operationalEventsOpenApi } from '../http/routes/operationalEvents.ts';
import { webhooksOpenApi } from '../http/routes/webhooksOpenApi.ts';
import { streamRoutes, streamsOpenApi } from '../http/routes/streams.ts';
import { IntegrityReader } from '../integrity/integrityReader.ts';
import { TransparencyLog } from '../integrity/transparencyLog.ts';
import { LiveFeed } from '../live/liveFeed.ts';
import { LongReadSlots } from '../platform/longReadSlots.ts';
import { RetentionPolicies } from '../lifecycle/retentionPolicies.ts';
import { StreamRegistry } from '../streams/streamRegistry.ts';
import { SERVICE_VERSION } from '../platform/version.ts';
import type { Role } from './role.ts';
import type { SharedParts } from './sharedParts.ts';
import { destinationOptions } from './streamsRole.ts';

type Features = PublicAppOptions['features'];
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
      afterAuthentication: parts.rateLimiting ? [rateLimit(limiter)] : [],
      version: SERVICE_VERSION,
      portalSessions,
      openFeatures: [{ router: portalBrowserRoutes(portal), openapi: portalBrowserOpenApi }],
      pages: [portalPages({ frameAncestors: config.portalFrameAncestors, log }), apiReferencePages({ log })],
      shortRequests: parts.longReads().shortRequests,
      features: [
        { router: portalSessionRoutes(portal), openapi: portalSessionsOpenApi },
        ...(await trailFeatures(parts, pepper)),
        ...(await webhookFeatures(parts, pepper)),
      ],
    });
    // Operators' redactions on the internal port, only where operator tokens are configured.
    const internalRoutes = config.operatorTokens ? [redactionRoutes(await parts.writer(), config.operatorTokens)] : [];
    return { readiness, publicHandler: app.callback(), internalRoutes };
  },
};

/** API keys, cached, with revocations reaching every pod through LISTEN/NOTIFY. */
async function startKeyVerifier(parts: SharedParts, pepper: string): Promise<ApiKeyVerifier> {
  const { config } = parts;
  const verifier = new ApiKeyVerifier({
    db: parts.db,
    databaseUrl: config.databaseSessionUrl,
    pepper,
    environment: config.keyEnvironment,
    log: parts.log.child({ component: 'key-verifier' }),
  });
  await verifier.start();
  parts.releasers.add('key verifier', () => verifier.stop());
  return verifier;
}

/** Per-key limits shared by every api pod through Redis; the limiter falls back to in-memory without it. */
function rateLimiterOf(parts: SharedParts): { limiter: KeyRateLimiter; readiness: ReadinessCheck[] } {
  const { config, log } = parts;
  const redis = connectRedis(config.redisUrl, log.child({ component: 'redis' }), config.redisTls, config.redisSentinel);
  parts.releasers.add('redis connection', () => void redis.disconnect());
  const limiter = new KeyRateLimiter({
    redis,
    limits: {
      read: config.rateLimits.readPerMinute,
      write: config.rateLimits.writePerMinute,
      auth: config.rateLimits.authFailuresPerMinute,
    },
    log: log.child({ component: 'rate-limiter' }),
    metrics: parts.metrics,
    keyPrefix: config.rateLimits.keyPrefix,
    windowSeconds: config.rateLimits.windowSeconds,
  });
  const check = async () => {
    await redis.ping();
  };
  return { limiter, readiness: [{ name: 'redis', critical: false, check }] };
}

/** Reading, exporting and proving the trail. */
async function trailFeatures(parts: SharedParts, pepper: string): Promise<Features> {
  const { db } = parts;
  const integrity = new IntegrityReader(db, pepper);
  return [
    // Before the events routes: /audit/events/:event_id would take "live" for an event id.
    await liveFeature(parts),
    { router: eventRoutes(new EventReader(db, new CursorCodec(pepper))), openapi: eventsOpenApi },
    { router: integrityRoutes(integrity, parts.config.seal.intervalMs), openapi: integrityOpenApi },
    { router: transparencyLogRoutes(new TransparencyLog(db)), openapi: transparencyLogOpenApi },
    {
      router: retentionRoutes(new RetentionPolicies({ db, writer: await parts.writer(), defaultPeriod: parts.config.retentionDefault })),
      openapi: retentionOpenApi,
    },
    {
      // Exports stream from the long-read pool, so lists and lookups never wait behind them.
      router: exportRoutes({
        exporter: new EventExporter(parts.longReads().db, EXPORT_ROW_CAP, parts.config.longReadFetchRows),
        writer: await parts.writer(),
        integrity: new IntegrityReader(parts.longReads().db, pepper),
        longReads: parts.longReads(),
      }),
      openapi: exportOpenApi,
    },
  ];
}

/**
 * Live streams of the trail (Server-Sent Events): woken by the sealer's notifications, admitted within caps
 * of their own (they hold no connection while they wait, so they need not count against exports), and
 * ended as soon as the process begins to stop, so that their clients reconnect to another pod.
 */
async function liveFeature(parts: SharedParts): Promise<Features[number]> {
  const { config } = parts;
  const feed = new LiveFeed({ databaseUrl: config.databaseSessionUrl, log: parts.log.child({ component: 'live-feed' }) });
  await feed.start();
  parts.releasers.add('live feed', () => feed.stop());
  const slots = new LongReadSlots(config.live, parts.metrics.liveStreamObserver(), 'concurrent_live_streams');
  return {
    router: liveRoutes({
      db: parts.db,
      feed,
      admission: { admit: (tenantId, what) => slots.take(tenantId, what) },
      heartbeatMs: config.live.heartbeatMs,
      stopping: parts.stopping,
      sealIntervalMs: config.seal.intervalMs,
    }),
    openapi: liveOpenApi,
  };
}

/** Webhook endpoints, their test sends, deliveries and replays. */
async function webhookFeatures(parts: SharedParts, pepper: string): Promise<Features> {
  const { config, db } = parts;
  const registry = await parts.webhookRegistry('the api role');
  // Test sends go out from the api role, through a sender of its own with the workers' settings.
  const testSender = new WebhookSender({
    timeoutMs: config.delivery.timeoutMs,
    connectionsPerEndpoint: 1,
    allowPrivateTargets: config.webhookAllowPrivateTargets,
  });
  parts.releasers.add('webhook test sender', () => testSender.close());
  const testDeliveries = new TestDeliveries({ registry, secrets: parts.secretBox('the api role'), sender: testSender });
  const deliveries = new WebhookDeliveries({ db, writer: await parts.writer(), cursors: new DeliveryCursorCodec(pepper) });
  return [
    // Before the endpoints' routes: its path would otherwise read as an endpoint id there.
    { router: operationalEventRoutes(db, pepper), openapi: operationalEventsOpenApi },
    { router: webhookRoutes(registry, testDeliveries), openapi: webhooksOpenApi({ allowHttp: config.webhookAllowHttp }) },
    await streamFeature(parts),
    { router: webhookDeliveryRoutes(deliveries), openapi: webhookDeliveriesOpenApi() },
    { router: webhookHealthRoutes(deliveries), openapi: webhookHealthOpenApi },
  ];
}

/** Log streams: their destinations, sealed secrets and test sends. */
async function streamFeature(parts: SharedParts): Promise<Features[number]> {
  const { config } = parts;
  const registry = new StreamRegistry({
    db: parts.db,
    writer: await parts.writer(),
    secrets: parts.secretBox('the api role'),
    policy: { allowHttp: config.webhookAllowHttp, allowPrivateTargets: config.webhookAllowPrivateTargets },
    destinations: destinationOptions(config),
  });
  return { router: streamRoutes(registry), openapi: streamsOpenApi({ allowHttp: config.webhookAllowHttp }) };
}
