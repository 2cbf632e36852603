import { Counter, Gauge, type Registry } from 'prom-client';
import { featureMetrics } from '../platform/metrics.ts';

/** The events this sealer appended, counted at each sealing pass. */
export const sealingMetrics = featureMetrics((registry: Registry) => ({
  eventsSealed: new Counter({
    name: 'audit_events_sealed_total',
    help: "Events appended to their tenant's Merkle tree by this sealer",
    registers: [registry],
  }),
}));

/**
 * The sealer's gauges, measured at each scrape rather than at each sealing pass, so that a stuck sealer shows
 * a growing age rather than a frozen one.
 */
export function registerSealerMetrics(
  registry: Registry,
  measure: { readonly oldestUnsealedAgeSeconds: () => Promise<number>; readonly forkedTenants: () => Iterable<string> },
): void {
  new Gauge({
    name: 'audit_seal_oldest_unsealed_age_seconds',
    help: 'Seconds since the oldest event still waiting for its Merkle leaf was committed; 0 when none waits',
    registers: [registry],
    async collect() {
      this.set(await measure.oldestUnsealedAgeSeconds());
    },
  });
  // AuditTrailTreeForked pages on it: 1 per tenant whose sealing the fork guard stopped.
  new Gauge({
    name: 'audit_tree_forked',
    help: '1 for a tenant whose database tree does not extend the head last signed for it: its sealing stopped (docs/integrity.md, The fork guard)',
    labelNames: ['tenant_id'],
    registers: [registry],
    collect() {
      for (const tenantId of measure.forkedTenants()) this.set({ tenant_id: tenantId }, 1);
    },
  });
}
