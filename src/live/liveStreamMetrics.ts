import { Counter, Gauge, type Registry } from 'prom-client';
import type { LongReadObserver } from '../platform/longReadSlots.ts';
import { featureMetrics } from '../platform/metrics.ts';

/** The live streams' admission observer (GET /audit/events/live): those open, and those refused at a cap. */
export const liveStreamMetrics = featureMetrics((registry: Registry): LongReadObserver => {
  const active = new Gauge({
    name: 'audit_live_streams_active',
    help: 'Live streams (GET /audit/events/live) open on this instance',
    registers: [registry],
  });
  const refused = new Counter({
    name: 'audit_live_streams_refused_total',
    help: "Live streams refused with 429 concurrent_live_streams, by the cap reached: the tenant's or the instance's",
    labelNames: ['limit'] as const,
    registers: [registry],
  });
  return {
    active: (delta) => active.inc(delta),
    refused: (limit) => refused.inc({ limit }),
  };
});
