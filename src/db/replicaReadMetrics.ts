import { Counter, Gauge, type Registry } from 'prom-client';
import type { ReplicaObserver } from './replicaReads.ts';

/** The metrics of reads on a streaming replica (db/replicaReads.ts, docs/operations.md "Replicas"). */
export function replicaReadMetrics(registry: Registry): ReplicaObserver {
  const lag = new Gauge({
    name: 'audit_read_replica_lag_seconds',
    help: 'The read replica’s lag as last measured (DATABASE_READ_URL); -1 while it does not answer',
    registers: [registry],
  });
  const fallbacks = new Counter({
    name: 'audit_read_replica_fallbacks_total',
    help: 'Reads that went to the primary instead of the read replica: lag (beyond READ_REPLICA_MAX_LAG) or unavailable',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  return {
    lag: (seconds) => lag.set(seconds ?? -1),
    fellBack: (reason) => fallbacks.inc({ reason }),
  };
}
