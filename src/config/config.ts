import type { z } from 'zod';
import { environmentSchema } from './environment.ts';
import { withPostgresTls } from './postgresTls.ts';

/**
 * The service's whole configuration comes from the environment (environment.ts), validated once at start into
 * a frozen, typed Config; a bad variable is a ConfigError that names it.
 */

export type Config = Readonly<ReturnType<typeof toConfig>>;

/** PEM files for a TLS connection; absent members fall back to Node's defaults (system CAs, no client certificate). */
export interface TlsFiles {
  readonly caFile?: string;
  readonly certFile?: string;
  readonly keyFile?: string;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
  readonly variable: string;

  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.variable = variable;
  }
}

/** Parses the environment; throws ConfigError naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as in most deployment tooling.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  const result = environmentSchema.safeParse(present);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new ConfigError(String(issue.path[0] ?? 'environment'), issue.message);
  }
  return Object.freeze(toConfig(result.data));
}

function tlsFiles(caFile: string | undefined, certFile: string | undefined, keyFile: string | undefined): TlsFiles | undefined {
  if (caFile === undefined && certFile === undefined) return undefined;
  return Object.freeze({ caFile, certFile, keyFile });
}

type Environment = z.output<typeof environmentSchema>;

/** The Kubernetes controller's part, apart so that toConfig stays one screen. */
function controllerSettings(env: Environment) {
  return {
    controllerNamespaces: env.CONTROLLER_NAMESPACES,
    controllerRequireTenantBinding: env.CONTROLLER_REQUIRE_TENANT_BINDING,
    controllerClass: env.CONTROLLER_CLASS,
    controllerLeaseName: env.CONTROLLER_LEASE_NAME,
    controllerResyncMs: env.CONTROLLER_RESYNC_MS,
    controllerLease: {
      leaseDurationMs: env.CONTROLLER_LEASE_DURATION_MS,
      renewDeadlineMs: env.CONTROLLER_RENEW_DEADLINE_MS,
      retryPeriodMs: env.CONTROLLER_RETRY_PERIOD_MS,
    },
  };
}

/** Where the service reaches Postgres: the URLs with their TLS files, and the pooler between. */
function databaseSettings(env: Environment) {
  const databaseTls = tlsFiles(env.DATABASE_SSL_CA, env.DATABASE_SSL_CERT, env.DATABASE_SSL_KEY);
  const withTls = (variable: string, url: string) => {
    try {
      return withPostgresTls(url, databaseTls);
    } catch (error) {
      throw new ConfigError(variable, (error as Error).message);
    }
  };
  const databaseUrl = withTls('DATABASE_URL', env.DATABASE_URL);
  return {
    databaseUrl,
    databasePooler: env.DATABASE_POOLER,
    // Where LISTEN, session advisory locks and migrations connect: DATABASE_URL unless a pooler is between.
    databaseSessionUrl: env.DATABASE_SESSION_URL === undefined ? databaseUrl : withTls('DATABASE_SESSION_URL', env.DATABASE_SESSION_URL),
    databaseReadUrl: env.DATABASE_READ_URL === undefined ? undefined : withTls('DATABASE_READ_URL', env.DATABASE_READ_URL),
    readReplicaMaxLagMs: env.READ_REPLICA_MAX_LAG,
    readReplicaReads: env.READ_REPLICA_READS,
  };
}

/** Redis Sentinel, when REDIS_SENTINELS names the sentinels. */
function redisSentinel(env: Environment) {
  if (env.REDIS_SENTINELS === undefined) return undefined;
  const sentinels = env.REDIS_SENTINELS.map((item) => {
    const colon = item.lastIndexOf(':');
    return { host: item.slice(0, colon), port: Number(item.slice(colon + 1)) };
  });
  return { name: env.REDIS_SENTINEL_NAME, sentinels };
}

function toConfig(env: Environment) {
  return {
    ...databaseSettings(env),
    databasePoolSize: env.DATABASE_POOL_SIZE,
    databaseLockTimeoutMs: env.DATABASE_LOCK_TIMEOUT,
    longReads: { perInstance: env.LONG_READS_PER_POD, perTenant: env.LONG_READS_PER_TENANT },
    longReadYield: { maxWaitMs: env.LONG_READ_YIELD, maxShare: env.LONG_READ_YIELD_SHARE },
    longReadDutyCycle: { dutyCycle: env.LONG_READ_DUTY_CYCLE, windowMs: env.LONG_READ_DUTY_WINDOW },
    longReadFetchRows: env.LONG_READ_FETCH_ROWS,
    live: { perInstance: env.LIVE_STREAMS_PER_POD, perTenant: env.LIVE_STREAMS_PER_TENANT, heartbeatMs: env.LIVE_HEARTBEAT },
    redisUrl: env.REDIS_URL,
    redisSentinel: redisSentinel(env),
    natsUrl: env.NATS_URL,
    natsNamespace: env.NATS_NAMESPACE,
    natsTls: tlsFiles(env.NATS_TLS_CA, env.NATS_TLS_CERT, env.NATS_TLS_KEY),
    natsCredsFile: env.NATS_CREDS,
    natsStreamReplicas: env.NATS_STREAM_REPLICAS,
    redisTls: tlsFiles(env.REDIS_TLS_CA, env.REDIS_TLS_CERT, env.REDIS_TLS_KEY),
    host: env.HOST,
    port: env.PORT,
    internalPort: env.INTERNAL_PORT,
    ingestTokens: env.INGEST_TOKENS,
    operatorTokens: env.OPERATOR_TOKENS,
    publicBaseUrl: env.PUBLIC_BASE_URL,
    portalFrameAncestors: env.PORTAL_FRAME_ANCESTORS,
    keyPepper: env.KEY_PEPPER,
    secretEncryptionKey: env.SECRET_ENCRYPTION_KEY,
    keyEnvironment: env.KEY_ENVIRONMENT,
    logLevel: env.LOG_LEVEL,
    trustedProxies: env.TRUSTED_PROXIES,
    ingestWindow: { maxAgeMs: env.INGEST_MAX_EVENT_AGE, maxFutureSkewMs: env.INGEST_MAX_FUTURE_SKEW },
    webhookAllowHttp: env.WEBHOOK_ALLOW_HTTP,
    webhookAllowPrivateTargets: env.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    delivery: {
      scheduleMs: env.DELIVERY_SCHEDULE,
      ackWaitMs: env.DELIVERY_ACK_WAIT_MS,
      endpointConcurrency: env.DELIVERY_ENDPOINT_CONCURRENCY,
      maxSockets: env.DELIVERY_MAX_SOCKETS,
      timeoutMs: env.DELIVERY_TIMEOUT_MS,
      relayPollMs: env.DELIVERY_RELAY_POLL_MS,
    },
    rateLimits: {
      readPerMinute: env.RATE_LIMIT_READ_PER_MINUTE,
      writePerMinute: env.RATE_LIMIT_WRITE_PER_MINUTE,
      authFailuresPerMinute: env.RATE_LIMIT_AUTH_FAILURES_PER_MINUTE,
      keyPrefix: env.RATE_LIMIT_KEY_PREFIX,
      windowSeconds: env.RATE_LIMIT_WINDOW_SECONDS,
    },
    ...controllerSettings(env),
    retentionDefault: env.RETENTION_DEFAULT,
    retention: {
      intervalMs: env.RETENTION_INTERVAL,
      batchSize: env.RETENTION_BATCH_SIZE,
      dutyCycle: env.RETENTION_DUTY_CYCLE,
      archiveStore: {
        region: env.ARCHIVE_S3_REGION,
        endpoint: env.ARCHIVE_S3_ENDPOINT,
        accessKeyId: env.ARCHIVE_S3_ACCESS_KEY_ID,
        secretAccessKey: env.ARCHIVE_S3_SECRET_ACCESS_KEY,
        forcePathStyle: env.ARCHIVE_S3_FORCE_PATH_STYLE,
      },
    },
    seal: {
      intervalMs: env.SEAL_INTERVAL,
      heartbeatMs: env.SEAL_HEARTBEAT,
      signingKey: env.SEAL_SIGNING_KEY,
      checkpointOrigin: env.CHECKPOINT_ORIGIN,
    },
    streams: {
      pollMs: env.STREAMS_POLL_MS,
      leaseMs: env.STREAMS_LEASE_MS,
      perProcess: env.STREAMS_PER_PROCESS,
      timeoutMs: env.STREAMS_TIMEOUT_MS,
      failingRetryMs: env.STREAMS_FAILING_RETRY_MS,
      hecAckTimeoutMs: env.STREAMS_HEC_ACK_TIMEOUT_MS,
    },
    podName: env.POD_NAME,
    podNamespace: env.POD_NAMESPACE,
    operatorActor: env.AUDIT_ACTOR,
    shutdownGraceMs: env.SHUTDOWN_GRACE_MS,
    shutdownDrainDelayMs: env.SHUTDOWN_DRAIN_DELAY_MS,
  };
}

/** Returns a secret the caller cannot run without, or fails naming the variable and who needs it. */
export function requireSetting<T>(value: T | undefined, variable: string, neededBy: string): T {
  if (value === undefined) throw new ConfigError(variable, `is required by ${neededBy}`);
  return value;
}
