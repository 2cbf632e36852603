import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { registerDeprecatedNames } from '../platform/deprecatedMetricNames.ts';
import { featureMetrics } from '../platform/metrics.ts';

/**
 * The metrics of webhook delivery: the worker's attempts and what became of them, the relay's publications
 * (docs/operations.md "Monitoring"). The families renamed under audit_ keep their old names for one release.
 */
export const deliveryMetrics = featureMetrics((registry: Registry) => {
  const declared = {
    attempts: new Counter({
      name: 'audit_webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by result: success, retry (failed, will retry) or failed (terminal)',
      labelNames: ['result'],
      registers: [registry],
    }),
    attemptDuration: new Histogram({
      name: 'audit_webhook_delivery_attempt_duration_seconds',
      help: 'Time from sending a delivery to the end of the receiver response',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    deferred: new Counter({
      name: 'audit_webhook_deliveries_deferred_total',
      help: 'Deliveries put back unattempted with a due time: the worker was stopping, or could not open the endpoint secret',
      registers: [registry],
    }),
    parked: new Counter({
      name: 'audit_webhook_deliveries_parked_total',
      help: 'Deliveries parked in Postgres because every slot of their endpoint in this worker was busy (a slow or hung receiver)',
      registers: [registry],
    }),
    unparked: new Counter({
      name: 'audit_webhook_deliveries_unparked_total',
      help: 'Parked deliveries released to be published again: by a finished request to their endpoint (request) or by the relay sweep (sweep)',
      labelNames: ['by'],
      registers: [registry],
    }),
    autoDisabled: new Counter({
      name: 'audit_webhook_endpoints_auto_disabled_total',
      help: 'Endpoints disabled after 10 consecutive failed deliveries',
      registers: [registry],
    }),
    rateLimitFallback: new Gauge({
      name: 'audit_webhook_rate_limit_fallback_active',
      help: '1 while Redis is unreachable and each worker enforces the per-endpoint webhook rate limits on its own',
      registers: [registry],
    }),
    published: new Counter({
      name: 'audit_webhook_relay_published_total',
      // The name is older than publishing on write; it counts every publication, so the alerts comparing it
      // with attempts (docs/operations.md) hold whoever published.
      help: 'Delivery attempts handed to JetStream, by the outbox relay or by the ingest process that wrote them',
      registers: [registry],
    }),
    republished: new Counter({
      name: 'audit_webhook_relay_republished_total',
      help: 'Deliveries whose JetStream message was lost (a relay died before publishing, NATS lost it), made due again',
      registers: [registry],
    }),
  };
  registerDeprecatedNames(registry, [
    declared.attempts,
    declared.attemptDuration,
    declared.deferred,
    declared.parked,
    declared.unparked,
    declared.autoDisabled,
    declared.published,
    declared.republished,
  ]);
  return declared;
});

/** The worker's webhook requests in flight, against its DELIVERY_MAX_SOCKETS. */
export function registerWebhookRequestsInFlight(registry: Registry, measure: () => number, cap: number): void {
  const gauge = new Gauge({
    name: 'audit_webhook_requests_in_flight',
    help: `Webhook requests (each on a socket) in flight from this worker; capped at DELIVERY_MAX_SOCKETS (${cap})`,
    registers: [registry],
    collect() {
      this.set(measure());
    },
  });
  registerDeprecatedNames(registry, [gauge]);
}
