import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { registerDeprecatedNames } from './deprecatedMetricNames.ts';
import type { LongReadObserver } from './longReadSlots.ts';

/** The audit_errors_total kinds charts/audit-trail's PrometheusRule alerts on (docs/operations.md "Monitoring"). */
const ALERTED_ERROR_KINDS = ['ingest_rejected', 'delivery_not_attempted', 'relay_failed', 'delivery_foreign_message'] as const;

/**
 * One registry per service instance (not prom-client's global one), so that two instances in one process,
 * as in tests, do not share or clash over metrics.
 */
export class ServiceMetrics {
  readonly registry = new Registry();

  readonly httpRequestDuration = new Histogram({
    name: 'audit_http_request_duration_seconds',
    help: 'HTTP request duration by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly eventsIngested = new Counter({
    name: 'audit_events_ingested_total',
    help: 'Audit events stored, by input (http, jetstream, internal)',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });

  readonly errors = new Counter({
    name: 'audit_errors_total',
    help: 'Errors by kind (http_5xx, dependency_unavailable, ingest_rejected, ...)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly dependencyUp = new Gauge({
    name: 'audit_dependency_up',
    help: '1 when the dependency answered the last readiness check, else 0',
    labelNames: ['dependency'] as const,
    registers: [this.registry],
  });

  readonly rateLimiterFallback = new Gauge({
    name: 'audit_rate_limiter_fallback_active',
    help: '1 while Redis is unreachable and rate limits are enforced per instance in memory',
    registers: [this.registry],
  });

  readonly webhookAttempts = new Counter({
    name: 'audit_webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts by result: success, retry (failed, will retry) or failed (terminal)',
    labelNames: ['result'],
    registers: [this.registry],
  });

  readonly webhookAttemptDuration = new Histogram({
    name: 'audit_webhook_delivery_attempt_duration_seconds',
    help: 'Time from sending a delivery to the end of the receiver response',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly webhookDeferred = new Counter({
    name: 'audit_webhook_deliveries_deferred_total',
    help: 'Deliveries put back unattempted with a due time: the worker was stopping, or could not open the endpoint secret',
    registers: [this.registry],
  });

  readonly webhookParked = new Counter({
    name: 'audit_webhook_deliveries_parked_total',
    help: 'Deliveries parked in Postgres because every slot of their endpoint in this worker was busy (a slow or hung receiver)',
    registers: [this.registry],
  });

  readonly webhookUnparked = new Counter({
    name: 'audit_webhook_deliveries_unparked_total',
    help: 'Parked deliveries released to be published again: by a finished request to their endpoint (request) or by the relay sweep (sweep)',
    labelNames: ['by'],
    registers: [this.registry],
  });

  readonly webhookAutoDisabled = new Counter({
    name: 'audit_webhook_endpoints_auto_disabled_total',
    help: 'Endpoints disabled after 10 consecutive failed deliveries',
    registers: [this.registry],
  });

  readonly webhookRateLimitFallback = new Gauge({
    name: 'audit_webhook_rate_limit_fallback_active',
    help: '1 while Redis is unreachable and each worker enforces the per-endpoint webhook rate limits on its own',
    registers: [this.registry],
  });

  readonly relayPublished = new Counter({
    name: 'audit_webhook_relay_published_total',
    // The name is older than publishing on write; it counts every publication, so the alerts comparing it
    // with attempts (docs/operations.md) hold whoever published.
    help: 'Delivery attempts handed to JetStream, by the outbox relay or by the ingest process that wrote them',
    registers: [this.registry],
  });

  readonly relayRepublished = new Counter({
    name: 'audit_webhook_relay_republished_total',
    help: 'Deliveries whose JetStream message was lost (a relay died before publishing, NATS lost it), made due again',
    registers: [this.registry],
  });

  readonly eventsSealed = new Counter({
    name: 'audit_events_sealed_total',
    help: "Events appended to their tenant's Merkle tree by this sealer",
    registers: [this.registry],
  });
  readonly eventsExpired = new Counter({
    name: 'audit_events_expired_total',
    help: 'Events removed because their retention period was over and no legal hold covered them',
    registers: [this.registry],
  });
  readonly expiryArchives = new Counter({
    name: 'audit_expiry_archives_total',
    help: 'Archive objects written before expiry, by outcome (written: read back intact; failed: nothing of the range expired)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly expiryRuns = new Counter({
    name: 'audit_expiry_runs_total',
    help: 'Expiry passes over every tenant (or one), by outcome',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  readonly streamEventsDelivered = new Counter({
    name: 'audit_stream_events_delivered_total',
    help: 'Events a log stream delivered (acknowledged by its destination), by stream',
    labelNames: ['stream'] as const,
    registers: [this.registry],
  });

  readonly streamBatchesFailed = new Counter({
    name: 'audit_stream_batches_failed_total',
    help: 'Batches a destination did not accept, by stream and outcome: retry (429, 5xx, timeout), too_large (413), refused (401, 403, 404...)',
    labelNames: ['stream', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly streamLagEvents = new Gauge({
    name: 'audit_stream_lag_events',
    help: "Sealed events not yet delivered by a log stream (filtered-out ones included), summed over the stream's tenants",
    labelNames: ['stream'] as const,
    registers: [this.registry],
  });

  readonly streamLagSeconds = new Gauge({
    name: 'audit_stream_lag_seconds',
    help: 'Seconds since the oldest sealed event a log stream has not delivered was written; 0 when it is caught up',
    labelNames: ['stream'] as const,
    registers: [this.registry],
  });

  readonly streamFailing = new Gauge({
    name: 'audit_stream_failing',
    help: 'Log streams whose destination refused a batch in a way retrying does not heal (1), by stream',
    labelNames: ['stream'] as const,
    registers: [this.registry],
  });

  readonly controllerCrdOutdated = new Gauge({
    name: 'audit_controller_crd_outdated',
    help: "1 while the controller refuses to reconcile a CRD's kind: the installed CRD is older than it needs, missing or unreadable",
    labelNames: ['crd'] as const,
    registers: [this.registry],
  });

  readonly controllerLeader = new Gauge({
    name: 'audit_controller_leader',
    help: "1 while this controller replica holds its release's Lease and reconciles; 0 while it stands by or cannot reach the Lease",
    labelNames: ['lease'] as const,
    registers: [this.registry],
  });
  readonly controllerLeaseErrors = new Counter({
    name: 'audit_controller_lease_errors_total',
    help: 'Tries to read, take or renew the Lease that failed: the API server refused them or could not be reached',
    labelNames: ['lease'] as const,
    registers: [this.registry],
  });
  readonly controllerReconcileErrors = new Counter({
    name: 'audit_controller_reconcile_errors_total',
    help: 'Reconciles that failed and are retried with backoff, by kind (its plural); a 409 conflict, retried at once, is not one',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly longReadsActive = new Gauge({
    name: 'audit_long_reads_active',
    help: 'Long reads (exports, exports with proofs) in progress on this instance',
    registers: [this.registry],
  });

  readonly longReadsRefused = new Counter({
    name: 'audit_long_reads_refused_total',
    help: "Long reads refused with 429 concurrent_exports, by the cap reached: the tenant's or the instance's",
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  readonly liveStreamsActive = new Gauge({
    name: 'audit_live_streams_active',
    help: 'Live streams (GET /audit/events/live) open on this instance',
    registers: [this.registry],
  });

  readonly liveStreamsRefused = new Counter({
    name: 'audit_live_streams_refused_total',
    help: "Live streams refused with 429 concurrent_live_streams, by the cap reached: the tenant's or the instance's",
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  // The pools registerPool() reads at each scrape, by name.
  private readonly pools = new Map<string, { readonly totalCount: number; readonly idleCount: number; readonly waitingCount: number }>();

  constructor() {
    // The event loop's delay sampled every 50 ms rather than prom-client's 10: a hundred wakeups a second were
    // most of an idle process's (issue 42). Not coarser: each sample counts the interval itself (an idle
    // process's p99 reads about the precision), and at 100 ms the lag alert's 0.2 s meant a tenth of a second.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 50 });
    // Renamed under audit_ (every family of ours has the prefix); the old names stay for one release.
    registerDeprecatedNames(this.registry, [
      this.httpRequestDuration,
      this.rateLimiterFallback,
      this.webhookAttempts,
      this.webhookAttemptDuration,
      this.webhookDeferred,
      this.webhookParked,
      this.webhookUnparked,
      this.webhookAutoDisabled,
      this.relayPublished,
      this.relayRepublished,
    ]);
    // The chart's alerts take increase() of these kinds, which sees nothing of a labelled series that first
    // appears already at 1: each is exported at 0 from the start, so that its first occurrence alerts.
    for (const kind of ALERTED_ERROR_KINDS) this.errors.inc({ kind }, 0);
  }

  /**
   * audit_db_pool_connections{pool, state}: a Postgres pool's connections (total, idle) and the requests
   * waiting for one (waiting > 0 means the pool is the limit), read at each scrape.
   */
  registerPool(name: string, pool: { readonly totalCount: number; readonly idleCount: number; readonly waitingCount: number }): void {
    let gauge = this.registry.getSingleMetric('audit_db_pool_connections') as Gauge<'pool' | 'state'> | undefined;
    gauge ??= new Gauge({
      name: 'audit_db_pool_connections',
      help: 'Connections of a Postgres pool of this process (state total or idle), and requests waiting for one (waiting)',
      labelNames: ['pool', 'state'] as const,
      registers: [this.registry],
      collect: () => {
        for (const [pool, counts] of this.pools) {
          gauge!.set({ pool, state: 'total' }, counts.totalCount);
          gauge!.set({ pool, state: 'idle' }, counts.idleCount);
          gauge!.set({ pool, state: 'waiting' }, counts.waitingCount);
        }
      },
    });
    this.pools.set(name, pool);
  }

  /** The long-read admission's observer: the gauge and the refusal counter above. */
  longReadObserver(): LongReadObserver {
    return {
      active: (delta) => this.longReadsActive.inc(delta),
      refused: (limit) => this.longReadsRefused.inc({ limit }),
    };
  }

  /** The live streams' admission observer: the gauge and the refusal counter above. */
  liveStreamObserver(): LongReadObserver {
    return {
      active: (delta) => this.liveStreamsActive.inc(delta),
      refused: (limit) => this.liveStreamsRefused.inc({ limit }),
    };
  }

  /** The worker's webhook requests in flight, against its DELIVERY_MAX_SOCKETS. */
  registerWebhookRequestsInFlight(measure: () => number, cap: number): void {
    const gauge = new Gauge({
      name: 'audit_webhook_requests_in_flight',
      help: `Webhook requests (each on a socket) in flight from this worker; capped at DELIVERY_MAX_SOCKETS (${cap})`,
      registers: [this.registry],
      collect() {
        this.set(measure());
      },
    });
    registerDeprecatedNames(this.registry, [gauge]);
  }
}
