import { z } from 'zod';
import { parseCidrList } from '../platform/cidr.ts';
import { DNS_LABEL_MAX_LENGTH, DNS_LABEL_PATTERN, DNS_SUBDOMAIN_MAX_LENGTH, DNS_SUBDOMAIN_PATTERN } from '../platform/kubernetesNames.ts';
import {
  FRAME_ANCESTOR,
  booleanFlag,
  commaList,
  deliverySchedule,
  duration,
  ed25519PrivateKey,
  port,
  postgresUrl,
  readableFile,
  retentionPeriod,
  urlWithScheme,
} from './valueFormats.ts';

/**
 * Every variable the service reads (the table in README.md), its format and its default: defaults live here
 * and nowhere else. Secrets have no defaults: a placeholder pepper would make every stored key hash guessable.
 */
export const environmentSchema = z
  .object({
    // One host, or several with target_session_attrs=read-write (config/postgresUrl.ts): the primary of a
    // failover formation wherever it is (docs/operations.md "High availability").
    DATABASE_URL: postgresUrl.default('postgres://postgres@127.0.0.1:5432/audit_trail'),
    // "transaction" behind PgBouncer in transaction mode: no named prepared statements, no session settings
    // at start; LISTEN, session advisory locks and migrations then use DATABASE_SESSION_URL (a direct or
    // session-mode connection), which it requires.
    DATABASE_POOLER: z.enum(['none', 'transaction'], { message: 'must be none or transaction' }).default('none'),
    DATABASE_SESSION_URL: postgresUrl.optional(),
    // A streaming replica for reads that can wait (exports without proofs, log streams; list pages with
    // READ_REPLICA_READS=all), used while its lag is within READ_REPLICA_MAX_LAG; the primary otherwise
    // (docs/operations.md "Replicas").
    DATABASE_READ_URL: postgresUrl.optional(),
    READ_REPLICA_MAX_LAG: duration('5s').pipe(z.number().min(0).max(600_000, 'must be at most 10m')).default(5_000),
    // Which of those reads go there: "long" (exports without proofs, log streams' backfills and catching up)
    // or "all" (list pages, the count and the action list too). Pages stay on the primary by default: there
    // they never queue behind exports on a replica, and they see every acknowledged write.
    READ_REPLICA_READS: z.enum(['long', 'all'], { message: 'must be long or all' }).default('long'),
    DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
    // How long a statement of the service may wait for a lock (a migration, a manual LOCK) before it fails
    // and its request answers 503 with Retry-After (docs/operations.md "How database trouble shows").
    DATABASE_LOCK_TIMEOUT: duration('1s')
      .pipe(z.number().min(10, 'must be at least 10ms').max(60_000, 'must be at most 60s'))
      .default(1000),
    // Long reads (exports, exports with proofs) run on a pool of their own, two connections per slot: at
    // most this many per api pod, and at most LONG_READS_PER_TENANT of one tenant (429 concurrent_exports).
    LONG_READS_PER_POD: z.coerce.number().int().min(1).max(100).default(4),
    LONG_READS_PER_TENANT: z.coerce.number().int().min(1).max(100).default(2),
    // Long reads yield to short requests (platform/longReadYield.ts): before each chunk an export waits for
    // the requests in flight to end, at most LONG_READ_YIELD at a time ("0ms" turns this off) and at most
    // LONG_READ_YIELD_SHARE of its time in all, so it takes at most 1 / (1 - share) as long as unhindered.
    LONG_READ_YIELD: duration('100ms').pipe(z.number().max(10_000, 'must be at most 10s')).default(100),
    LONG_READ_YIELD_SHARE: z.coerce.number().min(0).max(0.9).default(0.5),
    // While short requests are about (one in flight, or one within LONG_READ_DUTY_WINDOW), an export works at
    // most LONG_READ_DUTY_CYCLE of the wall time (platform/longReadDutyCycle.ts): after each round trip of
    // rows it pauses in proportion to the time the round trip took. 1 turns this off. 0.3: at 0.5 a lister's
    // p99 beside exports flat out was within 2x of its own in 2 runs of 6, at 0.3 in 4 of 4 (BENCHMARKS.md).
    LONG_READ_DUTY_CYCLE: z.coerce.number().min(0.1).max(1).default(0.3),
    LONG_READ_DUTY_WINDOW: duration('1s').pipe(z.number().max(60_000, 'must be at most 60s')).default(1000),
    // Rows an export reads per FETCH: a FETCH under way is not paused, so this is also how much of an
    // export's work a short request may still find running beside it.
    LONG_READ_FETCH_ROWS: z.coerce.number().int().min(10).max(10_000).default(100),
    // Live streams (GET /audit/events/live) hold no database connection while they wait, so their caps are
    // their own and higher: at most this many per api pod, LIVE_STREAMS_PER_TENANT of one tenant (429
    // concurrent_live_streams), each sent a heartbeat comment every LIVE_HEARTBEAT while nothing else is.
    LIVE_STREAMS_PER_POD: z.coerce.number().int().min(1).max(10_000).default(200),
    LIVE_STREAMS_PER_TENANT: z.coerce.number().int().min(1).max(1000).default(5),
    LIVE_HEARTBEAT: duration('15s').pipe(z.number().min(100, 'must be at least 100ms').max(60_000, 'must be at most 60s')).default(15_000),
    REDIS_URL: urlWithScheme(['redis', 'rediss']).default('redis://127.0.0.1:6379'),
    // Redis Sentinel (docs/operations.md "High availability"): the sentinels' host:port list and the name
    // they monitor the master under; REDIS_URL then gives only the password, database and TLS.
    REDIS_SENTINELS: commaList
      .refine((items) => items.length > 0 && items.every((item) => /^[^:\s]+:\d{1,5}$/.test(item)), 'must be host:port[,host:port...]')
      .optional(),
    REDIS_SENTINEL_NAME: z.string().min(1).default('mymaster'),
    NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222'),
    // Prefix for every subject and stream name, so deployments can share one NATS account without colliding.
    // Unset, the delivery work queue is still prefixed, with the deployment id (see BusNames).
    NATS_NAMESPACE: z
      .string()
      .regex(/^[A-Za-z0-9_-]*$/, 'must contain only letters, digits, _ and -')
      .default(''),
    // TLS to a private CA and client authentication, one file each (mounted from Secrets in Kubernetes).
    NATS_TLS_CA: readableFile.optional(),
    NATS_TLS_CERT: readableFile.optional(),
    NATS_TLS_KEY: readableFile.optional(),
    // A NATS credentials file (user JWT and NKey seed), as nsc writes it.
    NATS_CREDS: readableFile.optional(),
    // Replicas of the JetStream streams: 3 on a three-node NATS cluster, so a node can fail without loss.
    NATS_STREAM_REPLICAS: z.enum(['1', '3'], { message: 'must be 1 or 3' }).transform(Number).default(1),
    REDIS_TLS_CA: readableFile.optional(),
    REDIS_TLS_CERT: readableFile.optional(),
    REDIS_TLS_KEY: readableFile.optional(),
    // Become sslrootcert, sslcert and sslkey of DATABASE_URL, which may name them itself instead.
    DATABASE_SSL_CA: readableFile.optional(),
    DATABASE_SSL_CERT: readableFile.optional(),
    DATABASE_SSL_KEY: readableFile.optional(),
    HOST: z.string().min(1).default('0.0.0.0'),
    PORT: port.default(8080),
    INTERNAL_PORT: port.default(8081),
    INGEST_TOKENS: commaList
      .refine((tokens) => tokens.every((token) => token.length >= 24), 'each token must be at least 24 characters')
      .optional(),
    // Operators' actions on the internal port (POST /internal/v1/redactions); unset, the api role serves none.
    OPERATOR_TOKENS: commaList
      .refine((tokens) => tokens.every((token) => token.length >= 24), 'each token must be at least 24 characters')
      .optional(),
    // Where browsers reach the public API and the portal (https://audit.example.com, or with a path
    // prefix): the portal links minted for customers start with it.
    PUBLIC_BASE_URL: urlWithScheme(['http', 'https'])
      .refine((value) => !/[?#]/.test(value), 'must not have a query or fragment')
      .transform((value) => value.replace(/\/+$/, ''))
      .optional(),
    // The origins allowed to frame the portal (CSP frame-ancestors); none by default.
    PORTAL_FRAME_ANCESTORS: commaList
      .refine(
        (origins) => origins.every((origin) => FRAME_ANCESTOR.test(origin)),
        "must be a comma-separated list of origins such as https://console.example.com or https://*.example.com (scheme and host, no path), or 'self'",
      )
      .default([]),
    KEY_PEPPER: z.string().min(32, 'must be at least 32 characters of random data').optional(),
    SECRET_ENCRYPTION_KEY: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hex characters (a 256-bit AES key)')
      .optional(),
    KEY_ENVIRONMENT: z.enum(['live', 'test'], { message: 'must be live or test' }).default('live'),
    LOG_LEVEL: z
      .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
        message: 'must be one of fatal, error, warn, info, debug, trace, silent',
      })
      .default('info'),
    TRUSTED_PROXIES: commaList
      .transform((items, ctx) => {
        try {
          return parseCidrList(items);
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: (error as Error).message });
          return z.NEVER;
        }
      })
      .default([]),
    // The window of event times producers may write (ingestion/eventInput.ts: every month is a partition);
    // older history goes through `audit-trail import --allow-old`.
    INGEST_MAX_EVENT_AGE: duration('400d').default(400 * 86_400_000),
    INGEST_MAX_FUTURE_SKEW: duration('5m').default(5 * 60_000),
    WEBHOOK_ALLOW_HTTP: booleanFlag.default(false),
    WEBHOOK_ALLOW_PRIVATE_TARGETS: booleanFlag.default(false),
    DELIVERY_SCHEDULE: deliverySchedule.default([60_000, 300_000, 1_800_000, 7_200_000]),
    // How long a worker may hold a delivery message before JetStream hands it to another worker; a worker
    // extends it while the message waits, so this only bounds how fast a crashed worker's work moves on.
    DELIVERY_ACK_WAIT_MS: z.coerce.number().int().min(1000).default(30_000),
    // Concurrent requests to one endpoint from one worker; a slow receiver cannot take more than this.
    DELIVERY_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(16),
    // Requests in flight from one worker over all endpoints, each on a socket of its own: hung receivers of
    // one tenant share this instead of taking the process's file descriptors and event loop (issue 28).
    DELIVERY_MAX_SOCKETS: z.coerce.number().int().min(1).max(100_000).default(512),
    // The contract is a 2xx within 10 seconds (docs/webhooks.md). Shorter only in tests.
    DELIVERY_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
    // Only the safety net: new deliveries, retries falling due, released ones and new replays wake the relay
    // (LISTEN, and a timer to the next due time), so an idle relay rests (issue 42).
    DELIVERY_RELAY_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(30_000),
    RATE_LIMIT_READ_PER_MINUTE: z.coerce.number().int().min(1).default(1000),
    RATE_LIMIT_WRITE_PER_MINUTE: z.coerce.number().int().min(1).default(200),
    RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: z.coerce.number().int().min(1).default(30),
    RATE_LIMIT_KEY_PREFIX: z.string().min(1).default('audit-trail:rl'),
    // The documented limits are per minute (docs/api.md); a shorter window exists for tests and should not be set in production.
    RATE_LIMIT_WINDOW_SECONDS: z.coerce.number().int().min(1).max(3600).default(60),
    CONTROLLER_NAMESPACES: commaList.default([]),
    // Every watched namespace must be bound to a tenant (annotation audittrail.dev/tenant on the Namespace):
    // the resources of an unbound one are refused. A bound namespace is enforced either way.
    CONTROLLER_REQUIRE_TENANT_BINDING: booleanFlag.default(false),
    // The controller reconciles only ApiKey and WebhookEndpoint resources of this class (spec.controllerClass;
    // a resource without one is of class "default"), so that several releases can share a cluster.
    CONTROLLER_CLASS: z
      .string()
      .max(DNS_LABEL_MAX_LENGTH)
      .regex(DNS_LABEL_PATTERN, 'must be a DNS label (lowercase letters, digits and -)')
      .default('default'),
    // Leader election's Lease, in POD_NAMESPACE; the chart names it after the release, so that two releases
    // in one namespace do not elect one leader between them.
    CONTROLLER_LEASE_NAME: z
      .string()
      .max(DNS_SUBDOMAIN_MAX_LENGTH)
      .regex(DNS_SUBDOMAIN_PATTERN, 'must be a Kubernetes object name')
      .default('audit-trail-controller'),
    // The controller reconciles every resource this often; WebhookEndpoint status (failures, last delivery)
    // is refreshed by it, so it must stay under a minute.
    CONTROLLER_RESYNC_MS: z.coerce.number().int().min(1000).max(60_000).default(30_000),
    // Leader election (client-go's defaults): a lost leader stops acting within the renew deadline, and a
    // stand-by takes over after the lease duration.
    CONTROLLER_LEASE_DURATION_MS: z.coerce.number().int().min(1000).default(15_000),
    CONTROLLER_RENEW_DEADLINE_MS: z.coerce.number().int().min(500).default(10_000),
    CONTROLLER_RETRY_PERIOD_MS: z.coerce.number().int().min(100).default(2_000),
    // Tamper evidence (docs/integrity.md): every committed event gets its leaf within SEAL_INTERVAL, and a
    // tenant's tree gets a signed head at least every SEAL_HEARTBEAT even without new events.
    SEAL_INTERVAL: duration('10s').pipe(z.number().min(100, 'must be at least 100ms')).default(10_000),
    SEAL_HEARTBEAT: duration('1h')
      .pipe(z.number().min(1000, 'must be at least 1s').max(3_600_000, 'must be at most 1h: heads come at least hourly'))
      .default(3_600_000),
    SEAL_SIGNING_KEY: ed25519PrivateKey.optional(),
    // The first part of each tenant's checkpoint origin, `<CHECKPOINT_ORIGIN>/<tenant>` (docs/integrity.md
    // "Checkpoints and tiles"): a schema-less URL such as audit.example.com/trail; by default
    // audit-trail/<deployment id>. A tenant's origin is fixed by its first checkpoint.
    CHECKPOINT_ORIGIN: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._~:/-]{0,199}$/, 'must be a schema-less URL such as audit.example.com/trail (no spaces, no plus)')
      .transform((value) => value.replace(/\/+$/, ''))
      .optional(),
    // How long a tenant's events are kept when no RetentionPolicy names the tenant (docs/retention.md);
    // unset, they are kept forever. Days, months or years: 30d, 18mo, 6y.
    RETENTION_DEFAULT: retentionPeriod.optional(),
    // The retention role: how often it runs an expiry pass, and how many events one batch (one
    // transaction) removes: 1,000 holds a core for about 15 ms, short enough for ingest's p99 beside it
    // (BENCHMARKS.md, issue 31).
    RETENTION_INTERVAL: duration('1h').pipe(z.number().min(1000, 'must be at least 1s')).default(3_600_000),
    RETENTION_BATCH_SIZE: z.coerce.number().int().min(1).max(100_000).default(1_000),
    RETENTION_DUTY_CYCLE: z.coerce.number().gt(0, 'must be more than 0').max(1, 'must be at most 1').default(0.25),
    // Where the retention role archives a tenant's expiring events when its policy has spec.archive (the
    // policy names the bucket and prefix; the store and its credentials are the deployment's). Unset keys
    // fall back to the AWS SDK's own chain (environment, web identity, instance role).
    ARCHIVE_S3_REGION: z.string().min(1).default('us-east-1'),
    ARCHIVE_S3_ENDPOINT: z.url().optional(),
    ARCHIVE_S3_ACCESS_KEY_ID: z.string().min(1).optional(),
    ARCHIVE_S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
    ARCHIVE_S3_FORCE_PATH_STYLE: booleanFlag.default(false),
    // Log streams (docs/streams.md): how often the streams role renews its leases and an idle stream looks
    // for new sealed leaves; how long a lease lasts (a killed process's streams move on after it); how many
    // streams one process delivers; the time a destination has to answer a batch; and how often a failing
    // stream (its destination refused with 401, 403, 404...) tries again.
    STREAMS_POLL_MS: z.coerce.number().int().min(50).max(60_000).default(1000),
    STREAMS_LEASE_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
    STREAMS_PER_PROCESS: z.coerce.number().int().min(1).max(10_000).default(500),
    STREAMS_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(30_000),
    STREAMS_FAILING_RETRY_MS: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
    STREAMS_HEC_ACK_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(180_000),
    POD_NAME: z.string().optional(),
    POD_NAMESPACE: z.string().optional(),
    // Who the operator commands (keys, import) name as the actor of the admin events they write.
    AUDIT_ACTOR: z.string().min(1).max(256).default('operator-cli'),
    SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(10_000),
    // After SIGTERM: how long a pod keeps serving (not ready, Connection: close) before it stops accepting,
    // so that Services and load balancers stop sending to it first. The chart's preStop pause matches it.
    SHUTDOWN_DRAIN_DELAY_MS: z.coerce.number().int().min(0).max(120_000).default(5_000),
  })
  .superRefine((env, ctx) => {
    for (const prefix of ['NATS_TLS', 'REDIS_TLS', 'DATABASE_SSL'] as const) {
      if ((env[`${prefix}_CERT`] === undefined) !== (env[`${prefix}_KEY`] === undefined)) {
        const missing = env[`${prefix}_CERT`] === undefined ? `${prefix}_CERT` : `${prefix}_KEY`;
        ctx.addIssue({
          code: 'custom',
          path: [missing],
          message: `is required with ${prefix}_CERT and ${prefix}_KEY: a client certificate needs its key`,
        });
      }
    }
    if ((env.REDIS_TLS_CA ?? env.REDIS_TLS_CERT) !== undefined && !env.REDIS_URL.startsWith('rediss://')) {
      ctx.addIssue({ code: 'custom', path: ['REDIS_URL'], message: 'must be a rediss:// URL when REDIS_TLS_CA or REDIS_TLS_CERT is set' });
    }
    if (env.DATABASE_POOLER === 'transaction' && env.DATABASE_SESSION_URL === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['DATABASE_SESSION_URL'],
        message: 'is required with DATABASE_POOLER=transaction: LISTEN and session advisory locks need a connection of their own',
      });
    }
    if (env.LONG_READS_PER_TENANT > env.LONG_READS_PER_POD) {
      ctx.addIssue({ code: 'custom', path: ['LONG_READS_PER_TENANT'], message: 'must not be greater than LONG_READS_PER_POD' });
    }
    if (env.LIVE_STREAMS_PER_TENANT > env.LIVE_STREAMS_PER_POD) {
      ctx.addIssue({ code: 'custom', path: ['LIVE_STREAMS_PER_TENANT'], message: 'must not be greater than LIVE_STREAMS_PER_POD' });
    }
    // The old leader must stop acting before anyone else may start (client-go's invariant).
    if (!(env.CONTROLLER_LEASE_DURATION_MS > env.CONTROLLER_RENEW_DEADLINE_MS)) {
      ctx.addIssue({
        code: 'custom',
        path: ['CONTROLLER_LEASE_DURATION_MS'],
        message: 'must be greater than CONTROLLER_RENEW_DEADLINE_MS',
      });
    }
    if (!(env.CONTROLLER_RENEW_DEADLINE_MS > 1.2 * env.CONTROLLER_RETRY_PERIOD_MS)) {
      ctx.addIssue({
        code: 'custom',
        path: ['CONTROLLER_RENEW_DEADLINE_MS'],
        message: 'must be greater than 1.2 × CONTROLLER_RETRY_PERIOD_MS',
      });
    }
  });
