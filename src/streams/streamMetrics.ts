import { Counter, Gauge, type Registry } from 'prom-client';
import { featureMetrics } from '../platform/metrics.ts';

/** Each log stream's series, labelled by stream and removed with it (streams/streamWorker.ts). */
export const streamMetrics = featureMetrics((registry: Registry) => ({
  eventsDelivered: new Counter({
    name: 'audit_stream_events_delivered_total',
    help: 'Events a log stream delivered (acknowledged by its destination), by stream',
    labelNames: ['stream'] as const,
    registers: [registry],
  }),
  batchesFailed: new Counter({
    name: 'audit_stream_batches_failed_total',
    help: 'Batches a destination did not accept, by stream and outcome: retry (429, 5xx, timeout), too_large (413), refused (401, 403, 404...)',
    labelNames: ['stream', 'outcome'] as const,
    registers: [registry],
  }),
  lagEvents: new Gauge({
    name: 'audit_stream_lag_events',
    help: "Sealed events not yet delivered by a log stream (filtered-out ones included), summed over the stream's tenants",
    labelNames: ['stream'] as const,
    registers: [registry],
  }),
  lagSeconds: new Gauge({
    name: 'audit_stream_lag_seconds',
    help: 'Seconds since the oldest sealed event a log stream has not delivered was written; 0 when it is caught up',
    labelNames: ['stream'] as const,
    registers: [registry],
  }),
  failing: new Gauge({
    name: 'audit_stream_failing',
    help: 'Log streams whose destination refused a batch in a way retrying does not heal (1), by stream',
    labelNames: ['stream'] as const,
    registers: [registry],
  }),
}));
