import type { KubeConfig } from '@kubernetes/client-node';
import { connectBus, type BusConnection } from '../bus/natsConnection.ts';
import { BusNames } from '../bus/jetStreamDefinitions.ts';
import { requireSetting, type Config } from '../config/config.ts';
import { ConnectionBudget } from '../db/connectionBudget.ts';
import { Database } from '../db/database.ts';
import { readDeploymentId } from '../db/deploymentIdentity.ts';
import { LongReads } from '../db/longReads.ts';
import { type ReplicaObserver, ReplicaReads } from '../db/replicaReads.ts';
import { replicaReadMetrics } from '../db/replicaReadMetrics.ts';
import { longReadDutyCycleMetrics, longReadYieldMetrics } from '../platform/longReadYieldMetrics.ts';
import { untilPostgresAnswers } from '../db/postgresAtStart.ts';
import type { BackoffPolicy } from '../platform/backoff.ts';
import { ENDPOINT_DELIVERIES } from '../delivery/endpointDeliveries.ts';
import { WEBHOOK_FAN_OUT } from '../delivery/fanOut.ts';
import { DeliveryPublisher } from '../delivery/deliveryPublisher.ts';
import { EventWriter } from '../events/eventWriter.ts';
import type { ReadinessCheck } from '../http/internalApp.ts';
import type { Releasers } from '../platform/shutdown.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { SecretBox } from '../webhooks/secretBox.ts';
import { WebhookRegistry } from '../webhooks/webhookRegistry.ts';
import { registerPoolMetrics } from '../db/poolMetrics.ts';
import { longReadSlotMetrics } from '../platform/longReadSlotMetrics.ts';

/** Replays run at most a few at a time per process, and the controller reconciles one resource at a time. */
const SESSION_POOL_SIZE = 4;

export interface SharedPartsOptions {
  readonly config: Config;
  /** The roles this process runs, as given: they name its Postgres and NATS connections. */
  readonly roleNames: readonly string[];
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  readonly releasers: Releasers;
  /** Whether the writer publishes deliveries itself (a role of the process says so: Role.publishesDeliveries). */
  readonly publishesDeliveries: boolean;
  /** JetStream namespace instead of NATS_NAMESPACE. */
  readonly busNamespace?: string;
  /** Per-key rate limiting on the public API (ServiceOptions.rateLimiting). */
  readonly rateLimiting: boolean;
  /** The Kubernetes API for the controller role, instead of in-cluster credentials or KUBECONFIG. */
  readonly kubeConfig?: KubeConfig;
  /** Aborted when the process is asked to stop during start-up: a role waiting for Postgres gives up. */
  readonly startSignal?: AbortSignal;
  /** Between attempts of a start-up step while Postgres is away (db/postgresAtStart.ts). */
  readonly startBackoff?: BackoffPolicy;
}

export interface Bus {
  readonly connection: BusConnection;
  readonly names: BusNames;
}

/**
 * What the roles of one process share, each made once, when the first role asks for it: the Postgres pool,
 * the NATS connection and the deployment's names on it, the event writer, the secret box, the webhook
 * registry and the long-read pool. Whatever is opened registers its releaser at that moment, before the
 * role that asked for it registers its own, so it is released after every role that uses it.
 */
export class SharedParts {
  readonly config: Config;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  readonly releasers: Releasers;
  readonly db: Database;
  /** The process's share of Postgres' connections, which its pools keep within together. */
  private readonly connectionBudget = new ConnectionBudget();
  /** Readiness of the shared connections; the roles' own checks come from their RoleParts. */
  readonly readiness: ReadinessCheck[] = [];
  readonly rateLimiting: boolean;
  readonly kubeConfig: KubeConfig | undefined;
  /** Aborted when the process begins to stop (before the drain delay): long-lived responses end then. */
  readonly stopping: AbortSignal;
  private readonly stopController = new AbortController();
  /** The deployment id, once read (for the start-up log line). */
  deploymentIdRead: string | undefined;
  private readonly options: SharedPartsOptions;
  private deploymentIdOnce: Promise<string> | undefined;
  private busOnce: Promise<Bus> | undefined;
  private writerOnce: Promise<EventWriter> | undefined;
  private secretBoxOnce: SecretBox | undefined;
  private registryOnce: WebhookRegistry | undefined;
  private longReadsOnce: LongReads | undefined;
  private sessionDbOnce: Database | undefined;
  private replicaObserverOnce: ReplicaObserver | undefined;
  private replicaReadsOnce: ReplicaReads | undefined;
  private longReadReplicaOnce: ReplicaReads | undefined;

  constructor(options: SharedPartsOptions) {
    this.options = options;
    const { config, log, releasers } = options;
    this.config = config;
    this.log = log;
    this.metrics = options.metrics;
    this.releasers = releasers;
    this.rateLimiting = options.rateLimiting;
    this.kubeConfig = options.kubeConfig;
    this.stopping = this.stopController.signal;
    this.db = new Database({
      url: config.databaseUrl,
      poolSize: config.databasePoolSize,
      applicationName: this.connectionName,
      log,
      lockTimeoutMs: config.databaseLockTimeoutMs,
      pooler: config.databasePooler,
      // Behind PgBouncer (transaction mode) the server's connections are PgBouncer's to keep in bounds.
      budget: config.databasePooler === 'transaction' ? undefined : this.connectionBudget,
    });
    releasers.add('postgres pool', () => this.db.close());
    registerPoolMetrics(options.metrics, 'main', this.db.pool);
    this.readiness.push({ name: 'postgres', check: () => this.db.ping() });
  }

  /** The process begins to stop: what watches `stopping` winds down. */
  beginStopping(): void {
    this.stopController.abort();
  }

  private get connectionName(): string {
    return `audit-trail ${this.options.roleNames.join(',')}`;
  }

  /**
   * A role's start-up step that needs Postgres, retried with backoff while Postgres is away; the process is
   * not ready meanwhile (main.ts serves the internal port first). Every role waits the same way.
   */
  whenPostgresAnswers<T>(step: string, run: () => Promise<T>): Promise<T> {
    const { log, startSignal: signal, startBackoff: backoff } = this.options;
    return untilPostgresAnswers(step, run, { log, signal, backoff });
  }

  /**
   * Read once: it names this deployment's streams, messages and resources for as long as the process runs.
   * The first step of every role but the api's, so it is where they wait for Postgres at start.
   */
  deploymentId(): Promise<string> {
    this.deploymentIdOnce ??= this.whenPostgresAnswers('read the deployment id', () => readDeploymentId(this.db)).then(
      (id) => {
        this.deploymentIdRead = id;
        return id;
      },
      (error: unknown) => {
        // Not cached: a later caller (a start after an abandoned one) tries again.
        this.deploymentIdOnce = undefined;
        throw error;
      },
    );
    return this.deploymentIdOnce;
  }

  /** The NATS connection and this deployment's stream and subject names. */
  bus(): Promise<Bus> {
    this.busOnce ??= this.connectBus();
    return this.busOnce;
  }

  private async connectBus(): Promise<Bus> {
    const { config } = this;
    const names = new BusNames({ namespace: this.options.busNamespace ?? config.natsNamespace, deploymentId: await this.deploymentId() });
    const connection = await connectBus(config.natsUrl, this.connectionName, this.log, {
      tls: config.natsTls,
      credsFile: config.natsCredsFile,
    });
    this.releasers.add('nats connection', () => connection.close());
    // Degraded, not unready: nothing a pod serves over HTTP needs NATS (HTTP ingest writes to Postgres,
    // the API reads it), and a pod out of rotation would stop HTTP producers and readers for an outage
    // that only delays JetStream ingestion and deliveries, which resume by themselves.
    this.readiness.push({ name: 'nats', critical: false, check: () => connection.ping() });
    return { connection, names };
  }

  /** The one write path (events/eventWriter.ts), with the process's delivery publisher when it has one. */
  writer(): Promise<EventWriter> {
    this.writerOnce ??= this.makeWriter();
    return this.writerOnce;
  }

  private async makeWriter(): Promise<EventWriter> {
    if (!this.options.publishesDeliveries) return new EventWriter(this.db, WEBHOOK_FAN_OUT, this.metrics);
    const bus = await this.bus();
    const publisher = new DeliveryPublisher({
      db: this.db,
      bus: bus.connection,
      names: bus.names,
      log: this.log.child({ component: 'delivery-publisher' }),
      metrics: this.metrics,
    });
    // Registered before any role that writes, so it drains after they have stopped and before NATS closes.
    this.releasers.add('delivery publisher', () => publisher.drain());
    return new EventWriter(this.db, WEBHOOK_FAN_OUT, this.metrics, publisher);
  }

  /** Webhook secrets at rest (SECRET_ENCRYPTION_KEY), for whichever role needs them first. */
  secretBox(neededBy: string): SecretBox {
    this.secretBoxOnce ??= new SecretBox(requireSetting(this.config.secretEncryptionKey, 'SECRET_ENCRYPTION_KEY', neededBy));
    return this.secretBoxOnce;
  }

  /**
   * The pool and admission of long reads (db/longReads.ts): exports today, the log streams' reads to come.
   * Whatever holds a connection for as long as its client reads runs here, never on `db`.
   */
  longReads(): LongReads {
    if (!this.longReadsOnce) {
      const longReads = new LongReads({
        url: this.config.databaseUrl,
        limits: this.config.longReads,
        applicationName: `${this.connectionName} long-reads`,
        log: this.log,
        observer: longReadSlotMetrics(this.metrics),
        yieldLimits: this.config.longReadYield,
        dutyCycle: this.config.longReadDutyCycle,
        lockTimeoutMs: this.config.databaseLockTimeoutMs,
        pooler: this.config.databasePooler,
        // Behind PgBouncer (transaction mode) the server's connections are PgBouncer's to keep in bounds.
        budget: this.config.databasePooler === 'transaction' ? undefined : this.connectionBudget,
      });
      this.releasers.add('long-read pool', () => longReads.close());
      registerPoolMetrics(this.metrics, 'long_reads', longReads.db.pool);
      longReads.shortRequests.observe(longReadYieldMetrics(this.metrics.registry, longReads.shortRequests));
      longReads.dutyCycle.observe(longReadDutyCycleMetrics(this.metrics.registry));
      this.longReadsOnce = longReads;
    }
    return this.longReadsOnce;
  }

  /**
   * For session advisory locks held across statements (replays, the controller's reconciles): the main pool,
   * unless a pooler in transaction mode stands between, which would hand the lock's server connection to
   * other clients between statements; then a small pool of its own on DATABASE_SESSION_URL.
   */
  sessionDb(): Database {
    if (this.config.databasePooler === 'none') return this.db;
    if (!this.sessionDbOnce) {
      const sessionDb = new Database({
        url: this.config.databaseSessionUrl,
        poolSize: SESSION_POOL_SIZE,
        applicationName: `${this.connectionName} sessions`,
        log: this.log,
        lockTimeoutMs: this.config.databaseLockTimeoutMs,
      });
      this.releasers.add('postgres session pool', () => sessionDb.close());
      registerPoolMetrics(this.metrics, 'sessions', sessionDb.pool);
      this.sessionDbOnce = sessionDb;
    }
    return this.sessionDbOnce;
  }

  /**
   * Reads that can wait on the read replica within its lag bound (db/replicaReads.ts), on the primary's main
   * pool: log streams' reads, and list pages with READ_REPLICA_READS=all; undefined without DATABASE_READ_URL.
   */
  replicaReads(): ReplicaReads | undefined {
    if (this.config.databaseReadUrl === undefined) return undefined;
    this.replicaReadsOnce ??= this.openReplicaReads(this.db, this.config.databasePoolSize, 'replica');
    return this.replicaReadsOnce;
  }

  /** Exports without proofs on the read replica, in front of the long-read pool; undefined without one. */
  longReadReplica(): ReplicaReads | undefined {
    if (this.config.databaseReadUrl === undefined) return undefined;
    const slots = this.config.longReads.perInstance;
    this.longReadReplicaOnce ??= this.openReplicaReads(this.longReads().db, slots, 'replica long-reads');
    return this.longReadReplicaOnce;
  }

  private openReplicaReads(primary: Database, poolSize: number, name: string): ReplicaReads {
    const replica = new Database({
      url: this.config.databaseReadUrl!,
      poolSize,
      applicationName: `${this.connectionName} ${name}`,
      log: this.log,
      pooler: this.config.databasePooler,
    });
    this.releasers.add(`postgres ${name} pool`, () => replica.close());
    registerPoolMetrics(this.metrics, name.replace(/[^a-z]+/g, '_'), replica.pool);
    this.replicaObserverOnce ??= replicaReadMetrics(this.metrics.registry);
    return new ReplicaReads({ primary, replica, maxLagMs: this.config.readReplicaMaxLagMs, observer: this.replicaObserverOnce });
  }

  /** The webhook endpoints (REST and Kubernetes both register through it). */
  async webhookRegistry(neededBy: string): Promise<WebhookRegistry> {
    const writer = await this.writer();
    this.registryOnce ??= new WebhookRegistry({
      db: this.db,
      writer,
      deliveries: ENDPOINT_DELIVERIES,
      secrets: this.secretBox(neededBy),
      policy: { allowHttp: this.config.webhookAllowHttp, allowPrivateTargets: this.config.webhookAllowPrivateTargets },
    });
    return this.registryOnce;
  }
}
