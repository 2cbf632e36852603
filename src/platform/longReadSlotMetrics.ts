import { Counter, Gauge, type Registry } from 'prom-client';
import type { LongReadObserver } from './longReadSlots.ts';
import { featureMetrics } from './metrics.ts';

/** The long-read admission's observer (platform/longReadSlots.ts): exports in progress, and those refused at a cap. */
export const longReadSlotMetrics = featureMetrics((registry: Registry): LongReadObserver => {
  const active = new Gauge({
    name: 'audit_long_reads_active',
    help: 'Long reads (exports, exports with proofs) in progress on this instance',
    registers: [registry],
  });
  const refused = new Counter({
    name: 'audit_long_reads_refused_total',
    help: "Long reads refused with 429 concurrent_exports, by the cap reached: the tenant's or the instance's",
    labelNames: ['limit'] as const,
    registers: [registry],
  });
  return {
    active: (delta) => active.inc(delta),
    refused: (limit) => refused.inc({ limit }),
  };
});
