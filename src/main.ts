import { setTimeout as delay } from 'node:timers/promises';
import type Router from '@koa/router';
import type { KubeConfig } from '@kubernetes/client-node';
import { ApiKeyService } from './auth/apiKeyService.ts';
import { ApiKeyVerifier } from './auth/apiKeyVerifier.ts';
import { PortalSessions } from './auth/portalSessions.ts';
import { KeyRateLimiter } from './auth/rateLimiter.ts';
import { connectRedis } from './auth/redisConnection.ts';
import { connectBus, type BusConnection } from './bus/natsConnection.ts';
import { BusNames } from './bus/streams.ts';
import { requireSetting, type Config } from './config/config.ts';
import { Database } from './db/database.ts';
import { readDeploymentId } from './db/deploymentIdentity.ts';
import { DeliveryPublisher } from './delivery/deliveryPublisher.ts';
import { DeliveryRelay } from './delivery/deliveryRelay.ts';
import { DeliveryWorker } from './delivery/deliveryWorker.ts';
import { ReplayRunner } from './delivery/replayRunner.ts';
import { RetryPolicy } from './delivery/retryPolicy.ts';
import { TestDeliveries } from './delivery/testDelivery.ts';
import { WebhookSender } from './delivery/webhookSender.ts';
import { CursorCodec } from './events/cursor.ts';
import { DeliveryCursorCodec } from './delivery/deliveryCursor.ts';
import { EventExporter } from './events/eventExport.ts';
import { EventReader } from './events/eventReader.ts';
import { ensureEventPartitions } from './events/eventStore.ts';
import { HttpPort } from './http/httpServer.ts';
import { integrityOpenApi, integrityRoutes } from './http/routes/integrity.ts';
import { IntegrityReader } from './integrity/integrityReader.ts';
import { startSealer } from './integrity/sealerRole.ts';
import { StreamRegistry } from './streams/streamRegistry.ts';
import { destinationOptions, startStreams } from './streams/streamsRole.ts';
import { streamRoutes, streamsOpenApi } from './http/routes/streams.ts';
import { buildInternalApp, type ReadinessCheck } from './http/internalApp.ts';
import { buildPublicApp } from './http/publicApp.ts';
import { portalPages } from './http/portalPages.ts';
import { portalBrowserOpenApi, portalBrowserRoutes, portalSessionRoutes, portalSessionsOpenApi } from './http/routes/portalSessions.ts';
import { eventRoutes, eventsOpenApi } from './http/routes/events.ts';
import { exportOpenApi, exportRoutes } from './http/routes/export.ts';
import { rateLimit } from './http/rateLimit.ts';
import { ingestRoutes } from './http/routes/ingest.ts';
import { webhookRoutes, webhooksOpenApi } from './http/routes/webhooks.ts';
import { webhookDeliveriesOpenApi, webhookDeliveryRoutes } from './http/routes/webhookDeliveries.ts';
import type { RequestState } from './http/state.ts';
import { EventWriter } from './events/eventWriter.ts';
import { JetStreamIngest } from './ingestion/jetstreamIngest.ts';
import { Releasers } from './platform/lifecycle.ts';
import type { Logger } from './platform/logger.ts';
import { ServiceMetrics } from './platform/metrics.ts';
import { SERVICE_VERSION } from './platform/version.ts';
import { SecretBox } from './webhooks/secretBox.ts';
import { WebhookDeliveries } from './delivery/deliveryOperations.ts';
import { WebhookRegistry } from './webhooks/webhookRegistry.ts';
import { WEBHOOK_FAN_OUT } from './delivery/fanOut.ts';
import { ENDPOINT_DELIVERIES } from './delivery/endpointDeliveries.ts';

export const ROLES = ['api', 'ingest', 'relay', 'worker', 'controller', 'sealer', 'streams'] as const;
export type Role = (typeof ROLES)[number];

export interface RunningService {
  /** The public API's port, when the api role runs. */
  readonly publicPort: number | undefined;
  readonly internalPort: number;
  readonly metrics: ServiceMetrics;
  /** Graceful stop: refuse new work, drain in-flight requests and messages, close clients in reverse order. */
  stop(): Promise<void>;
}

export interface ServiceOptions {
  readonly config: Config;
  readonly roles: readonly Role[];
  readonly log: Logger;
  /** JetStream namespace instead of NATS_NAMESPACE (tests isolate themselves with a unique one). */
  readonly busNamespace?: string;
  /**
   * Per-key rate limiting on the public API; on unless a benchmark measures its cost by turning it off.
   * Deliberately not configuration: the documented limits are part of the contract.
   */
  readonly rateLimiting?: boolean;
  /** The Kubernetes API the controller role talks to; by default in-cluster credentials or KUBECONFIG. */
  readonly kubeConfig?: KubeConfig;
}

// Future months whose partitions the ingest role keeps ready, re-checked every few hours.
const PARTITION_MONTHS_AHEAD = 3;
const PARTITION_CHECK_INTERVAL_MS = 6 * 3_600_000;

/**
 * The composition root: opens each client the selected roles need, starts the roles, serves the public
 * and internal ports, and returns a stop() that undoes it all in reverse order.
 */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { config, roles, log } = options;
  const has = (role: Role) => roles.includes(role);
  const releasers = new Releasers();
  const metrics = new ServiceMetrics();
  const readiness: ReadinessCheck[] = [];
  const internalRoutes: Router<RequestState>[] = [];
  let accepting = true;
  const closing = () => !accepting;
  let publicServer: HttpPort | undefined;
  let internalServer: HttpPort | undefined;
  let deploymentId: string | undefined;

  try {
    const db = new Database({
      url: config.databaseUrl,
      poolSize: config.databasePoolSize,
      applicationName: `audit-trail ${roles.join(',')}`,
      log,
    });
    releasers.add('postgres pool', () => db.close());
    readiness.push({ name: 'postgres', check: () => db.ping() });

    let bus: BusConnection | undefined;
    let busNames: BusNames | undefined;
    let publisher: DeliveryPublisher | undefined;
    if (has('ingest') || has('relay') || has('worker')) {
      // Read once: it names this deployment's streams and messages for as long as the process runs.
      deploymentId = await readDeploymentId(db);
      busNames = new BusNames({ namespace: options.busNamespace ?? config.natsNamespace, deploymentId });
      bus = await connectBus(config.natsUrl, `audit-trail ${roles.join(',')}`, log, {
        tls: config.natsTls,
        credsFile: config.natsCredsFile,
      });
      releasers.add('nats connection', () => bus!.close());
      // Degraded, not unready: nothing a pod serves over HTTP needs NATS (HTTP ingest writes to Postgres,
      // the API reads it), and a pod out of rotation would stop HTTP producers and readers for an outage
      // that only delays JetStream ingestion and deliveries, which resume by themselves.
      readiness.push({ name: 'nats', critical: false, check: () => bus!.ping() });
    }
    if (has('ingest')) {
      // Ingest writes nearly every event: it publishes their deliveries itself, and the relays take the rest.
      publisher = new DeliveryPublisher({
        db,
        bus: bus!,
        names: busNames!,
        log: log.child({ role: 'ingest', component: 'delivery-publisher' }),
        metrics,
      });
      // Released before the NATS connection (releasers run in reverse), after ingestion has stopped.
      releasers.add('delivery publisher', () => publisher!.drain());
    }
    const writer = new EventWriter(db, WEBHOOK_FAN_OUT, metrics, publisher);

    if (has('ingest')) {
      const tokens = requireSetting(config.ingestTokens, 'INGEST_TOKENS', 'the ingest role');
      internalRoutes.push(ingestRoutes(writer, tokens, config.ingestWindow));
      const ingest = new JetStreamIngest({
        bus: bus!,
        names: busNames!,
        streamReplicas: config.natsStreamReplicas,
        writer,
        window: config.ingestWindow,
        log: log.child({ role: 'ingest' }),
        metrics,
      });
      await ingest.start();
      releasers.add('jetstream ingest', () => ingest.stop());
      const keepPartitionsAhead = () =>
        ensureEventPartitions(db, monthsAhead(PARTITION_MONTHS_AHEAD)).catch((error: Error) =>
          log.warn({ err: error }, 'could not create upcoming event partitions; will retry'),
        );
      await keepPartitionsAhead();
      const timer = setInterval(keepPartitionsAhead, PARTITION_CHECK_INTERVAL_MS).unref();
      releasers.add('partition maintenance', () => clearInterval(timer));
    }

    if (has('relay')) {
      const relay = new DeliveryRelay({
        db,
        databaseUrl: config.databaseUrl,
        bus: bus!,
        names: busNames!,
        streamReplicas: config.natsStreamReplicas,
        ackWaitMs: config.delivery.ackWaitMs,
        pollMs: config.delivery.relayPollMs,
        log: log.child({ role: 'relay' }),
        metrics,
      });
      await relay.start();
      releasers.add('delivery relay', () => relay.stop());
      // Replays are outbox work: the relays run them, one process per replay (delivery/replayRunner.ts).
      const replays = new ReplayRunner({
        db,
        pollMs: Math.min(config.delivery.relayPollMs, 1_000),
        log: log.child({ role: 'relay', component: 'replays' }),
        metrics,
      });
      replays.start();
      releasers.add('replay runner', () => replays.stop());
    }

    if (has('worker')) {
      const secretKey = requireSetting(config.secretEncryptionKey, 'SECRET_ENCRYPTION_KEY', 'the worker role');
      const sender = new WebhookSender({
        timeoutMs: config.delivery.timeoutMs,
        connectionsPerEndpoint: config.delivery.endpointConcurrency,
        allowPrivateTargets: config.webhookAllowPrivateTargets,
      });
      releasers.add('webhook sender', () => sender.close());
      const worker = new DeliveryWorker({
        db,
        databaseUrl: config.databaseUrl,
        bus: bus!,
        names: busNames!,
        streamReplicas: config.natsStreamReplicas,
        writer,
        secrets: new SecretBox(secretKey),
        sender,
        retryPolicy: new RetryPolicy(config.delivery.scheduleMs),
        ackWaitMs: config.delivery.ackWaitMs,
        endpointConcurrency: config.delivery.endpointConcurrency,
        log: log.child({ role: 'worker' }),
        metrics,
      });
      await worker.start();
      releasers.add('delivery worker', () => worker.stop());
    }

    if (has('sealer')) readiness.push(await startSealer(config, db, log.child({ role: 'sealer' }), metrics, releasers));
    if (has('streams')) startStreams(config, db, log.child({ role: 'streams' }), metrics, releasers);

    if (has('controller')) {
      const pepper = requireSetting(config.keyPepper, 'KEY_PEPPER', 'the controller role');
      // Loaded only for this role: the Kubernetes client alone adds about 80 MB to a process's memory.
      const { KubernetesController } = await import('./controller/controller.ts');
      const kubeConfig = options.kubeConfig ?? (await defaultKubeConfig());
      const controller = new KubernetesController({
        kubeConfig,
        keys: new ApiKeyService({ db, writer, pepper, environment: config.keyEnvironment }),
        registry: webhookRegistry(config, db, writer, 'the controller role'),
        deploymentId: await readDeploymentId(db),
        controllerClass: config.controllerClass,
        namespaces: config.controllerNamespaces,
        leaseNamespace: config.podNamespace ?? 'default',
        leaseName: config.controllerLeaseName,
        identity: config.podName,
        log: log.child({ role: 'controller' }),
        resyncMs: config.controllerResyncMs,
        leaseTiming: config.controllerLease,
        metrics,
      });
      controller.start();
      releasers.add('kubernetes controller', () => controller.stop());
      // Not ready while its CRDs are older than it needs: a rollout with stale CRDs stops at its first pod.
      readiness.push(controller.readiness);
    }

    if (has('api')) {
      const pepper = requireSetting(config.keyPepper, 'KEY_PEPPER', 'the api role');
      const verifier = new ApiKeyVerifier({
        db,
        databaseUrl: config.databaseUrl,
        pepper,
        environment: config.keyEnvironment,
        log: log.child({ component: 'key-verifier' }),
      });
      await verifier.start();
      releasers.add('key verifier', () => verifier.stop());
      const redis = connectRedis(config.redisUrl, log.child({ component: 'redis' }), config.redisTls);
      releasers.add('redis connection', () => void redis.disconnect());
      const limiter = new KeyRateLimiter({
        redis,
        limits: {
          read: config.rateLimits.readPerMinute,
          write: config.rateLimits.writePerMinute,
          auth: config.rateLimits.authFailuresPerMinute,
        },
        log: log.child({ component: 'rate-limiter' }),
        metrics,
        keyPrefix: config.rateLimits.keyPrefix,
        windowSeconds: config.rateLimits.windowSeconds,
      });
      readiness.push({
        name: 'redis',
        critical: false,
        check: async () => {
          await redis.ping();
        },
      });
      const registry = webhookRegistry(config, db, writer, 'the api role');
      // Test sends go out from the api role, through a sender of its own with the workers' settings.
      const testSender = new WebhookSender({
        timeoutMs: config.delivery.timeoutMs,
        connectionsPerEndpoint: 1,
        allowPrivateTargets: config.webhookAllowPrivateTargets,
      });
      releasers.add('webhook test sender', () => testSender.close());
      const testDeliveries = new TestDeliveries({
        registry,
        secrets: new SecretBox(requireSetting(config.secretEncryptionKey, 'SECRET_ENCRYPTION_KEY', 'the api role')),
        sender: testSender,
      });
      const portalSessions = new PortalSessions({ db, writer, pepper });
      const portal = { sessions: portalSessions, publicBaseUrl: config.publicBaseUrl, failureLimiter: limiter };
      const reader = new EventReader(db, new CursorCodec(pepper));
      const integrity = new IntegrityReader(db, pepper);
      const app = buildPublicApp({
        log,
        metrics,
        trustedProxies: config.trustedProxies,
        verifier,
        failureLimiter: limiter,
        afterAuthentication: options.rateLimiting === false ? [] : [rateLimit(limiter)],
        version: SERVICE_VERSION,
        portalSessions,
        openFeatures: [{ router: portalBrowserRoutes(portal), openapi: portalBrowserOpenApi }],
        pages: portalPages({ frameAncestors: config.portalFrameAncestors, log }),
        features: [
          { router: portalSessionRoutes(portal), openapi: portalSessionsOpenApi },
          { router: eventRoutes(reader), openapi: eventsOpenApi },
          { router: integrityRoutes(integrity, config.seal.intervalMs), openapi: integrityOpenApi },
          { router: exportRoutes(new EventExporter(db), writer, integrity), openapi: exportOpenApi },
          { router: webhookRoutes(registry, testDeliveries), openapi: webhooksOpenApi({ allowHttp: config.webhookAllowHttp }) },
          {
            router: streamRoutes(
              new StreamRegistry({
                db,
                writer,
                secrets: new SecretBox(requireSetting(config.secretEncryptionKey, 'SECRET_ENCRYPTION_KEY', 'the api role')),
                policy: { allowHttp: config.webhookAllowHttp, allowPrivateTargets: config.webhookAllowPrivateTargets },
                destinations: destinationOptions(config),
              }),
            ),
            openapi: streamsOpenApi({ allowHttp: config.webhookAllowHttp }),
          },
          {
            router: webhookDeliveryRoutes(new WebhookDeliveries({ db, writer, cursors: new DeliveryCursorCodec(pepper) })),
            openapi: webhookDeliveriesOpenApi(),
          },
        ],
      });
      publicServer = await HttpPort.listen(app.callback(), config.host, config.port, closing);
      releasers.add('public server', () => publicServer!.close(config.shutdownGraceMs));
    }

    const internalApp = buildInternalApp({
      log,
      metrics,
      trustedProxies: config.trustedProxies,
      readiness,
      features: internalRoutes,
      accepting: () => accepting,
    });
    internalServer = await HttpPort.listen(internalApp.callback(), config.host, config.internalPort, closing);
    releasers.add('internal server', () => internalServer!.close(config.shutdownGraceMs));
  } catch (error) {
    await releasers.releaseAll(log);
    throw error;
  }

  log.info(
    { roles, public_port: publicServer?.port, internal_port: internalServer?.port, version: SERVICE_VERSION, deployment_id: deploymentId },
    'audit-trail started',
  );
  // Kubernetes takes a terminating pod out of its Services' endpoints a moment after it is signalled, and
  // load balancers follow later still: until then new requests keep arriving, and refusing them would be
  // errors for clients. Only roles behind a Service wait.
  const drainDelayMs = has('api') || has('ingest') ? config.shutdownDrainDelayMs : 0;
  return {
    publicPort: publicServer?.port,
    internalPort: internalServer!.port,
    metrics,
    async stop() {
      if (!accepting) return;
      // Readiness fails from now on; requests are still served, each answered with Connection: close.
      accepting = false;
      if (drainDelayMs > 0) {
        log.info({ drain_delay_ms: drainDelayMs }, 'not ready; serving while endpoints drain');
        await delay(drainDelayMs);
      }
      await releasers.releaseAll(log);
      log.info('audit-trail stopped');
    },
  };
}

export function webhookRegistry(config: Config, db: Database, writer: EventWriter, neededBy: string): WebhookRegistry {
  return new WebhookRegistry({
    db,
    writer,
    deliveries: ENDPOINT_DELIVERIES,
    secrets: new SecretBox(requireSetting(config.secretEncryptionKey, 'SECRET_ENCRYPTION_KEY', neededBy)),
    policy: { allowHttp: config.webhookAllowHttp, allowPrivateTargets: config.webhookAllowPrivateTargets },
  });
}

async function defaultKubeConfig(): Promise<KubeConfig> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  return kubeConfig;
}

function monthsAhead(count: number): number[] {
  const now = new Date();
  return Array.from({ length: count + 1 }, (_, index) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + index, 1));
}
