import { Gauge, type Registry } from 'prom-client';
import { featureMetrics } from '../platform/metrics.ts';

/** What a pool tells of itself: pg.Pool's counts. */
interface PoolCounts {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
}

/**
 * audit_db_pool_connections{pool, state}: a Postgres pool's connections (total, idle) and the requests
 * waiting for one (waiting > 0 means the pool is the limit), read at each scrape from the pools registered.
 */
const poolGauge = featureMetrics((registry: Registry) => {
  const pools = new Map<string, PoolCounts>();
  new Gauge({
    name: 'audit_db_pool_connections',
    help: 'Connections of a Postgres pool of this process (state total or idle), and requests waiting for one (waiting)',
    labelNames: ['pool', 'state'] as const,
    registers: [registry],
    collect() {
      for (const [pool, counts] of pools) {
        this.set({ pool, state: 'total' }, counts.totalCount);
        this.set({ pool, state: 'idle' }, counts.idleCount);
        this.set({ pool, state: 'waiting' }, counts.waitingCount);
      }
    },
  });
  return pools;
});

/** Exports a pool's counts under its name, from the next scrape on. */
export function registerPoolMetrics(metrics: { readonly registry: Registry }, name: string, pool: PoolCounts): void {
  poolGauge(metrics).set(name, pool);
}
