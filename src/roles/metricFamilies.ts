import { rateLimiterMetrics } from '../auth/rateLimiterMetrics.ts';
import { controllerMetrics } from '../controller/controllerMetrics.ts';
import { deliveryMetrics } from '../delivery/deliveryMetrics.ts';
import { eventMetrics } from '../events/eventMetrics.ts';
import { httpMetrics } from '../http/httpMetrics.ts';
import { sealingMetrics } from '../integrity/sealerMetrics.ts';
import { expiryMetrics } from '../lifecycle/expiryMetrics.ts';
import { liveStreamMetrics } from '../live/liveStreamMetrics.ts';
import { longReadSlotMetrics } from '../platform/longReadSlotMetrics.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { streamMetrics } from '../streams/streamMetrics.ts';

/**
 * Every feature's metric families, declared at start whichever roles run: a process exports each from zero,
 * so that the chart's alerts and dashboards find every name they select on any pod (test/chart/monitoring.test.ts),
 * and increase() sees a family's first event. The metrics measured from a role's own parts (the sealer's age,
 * the pools, the worker's requests in flight, long reads yielding) are declared by the role that has them.
 */
export function declareMetricFamilies(metrics: ServiceMetrics): void {
  for (const declare of [
    httpMetrics,
    eventMetrics,
    rateLimiterMetrics,
    deliveryMetrics,
    sealingMetrics,
    expiryMetrics,
    streamMetrics,
    controllerMetrics,
    longReadSlotMetrics,
    liveStreamMetrics,
  ])
    declare(metrics);
}
