import { Counter, Registry, collectDefaultMetrics } from 'prom-client';

/** The audit_errors_total kinds charts/audit-trail's PrometheusRule alerts on (docs/operations.md "Monitoring"). */
const ALERTED_ERROR_KINDS = ['ingest_rejected', 'delivery_not_attempted', 'relay_failed', 'delivery_foreign_message'] as const;

/**
 * One registry per service instance (not prom-client's global one), so that two instances in one process,
 * as in tests, do not share or clash over metrics. It holds the process's own metrics and the errors every
 * feature counts; each feature declares its metrics in its own folder (featureMetrics below).
 */
export class ServiceMetrics {
  readonly registry = new Registry();

  readonly errors = new Counter({
    name: 'audit_errors_total',
    help: 'Errors by kind (http_5xx, dependency_unavailable, ingest_rejected, ...)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  constructor() {
    // The event loop's delay sampled every 50 ms rather than prom-client's 10: a hundred wakeups a second were
    // most of an idle process's (issue 42). Not coarser: each sample counts the interval itself (an idle
    // process's p99 reads about the precision), and at 100 ms the lag alert's 0.2 s meant a tenth of a second.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 50 });
    // The chart's alerts take increase() of these kinds, which sees nothing of a labelled series that first
    // appears already at 1: each is exported at 0 from the start, so that its first occurrence alerts.
    for (const kind of ALERTED_ERROR_KINDS) this.errors.inc({ kind }, 0);
  }
}

/**
 * A feature's metrics, declared on a service's registry the first time they are asked for and the same
 * objects every time after: a registry refuses a name twice, and the roles of one process share its registry
 * (the ingest's publisher and the relay both count publications). Each feature keeps its declarations in its
 * own folder; main.ts asks for every feature's at start, so that /metrics exports each family from zero.
 */
export function featureMetrics<T>(declare: (registry: Registry) => T): (metrics: Pick<ServiceMetrics, 'registry'>) => T {
  const declared = new WeakMap<Registry, T>();
  return ({ registry }) => {
    let found = declared.get(registry);
    if (found === undefined) {
      found = declare(registry);
      declared.set(registry, found);
    }
    return found;
  };
}
