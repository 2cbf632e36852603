import { Counter, Gauge, type Registry } from 'prom-client';
import { featureMetrics } from '../platform/metrics.ts';

/** The controller's metrics: its leadership, the CRDs it refuses, and the reconciles it retries. */
export const controllerMetrics = featureMetrics((registry: Registry) => ({
  crdOutdated: new Gauge({
    name: 'audit_controller_crd_outdated',
    help: "1 while the controller refuses to reconcile a CRD's kind: the installed CRD is older than it needs, missing or unreadable",
    labelNames: ['crd'] as const,
    registers: [registry],
  }),
  leader: new Gauge({
    name: 'audit_controller_leader',
    help: "1 while this controller replica holds its release's Lease and reconciles; 0 while it stands by or cannot reach the Lease",
    labelNames: ['lease'] as const,
    registers: [registry],
  }),
  leaseErrors: new Counter({
    name: 'audit_controller_lease_errors_total',
    help: 'Tries to read, take or renew the Lease that failed: the API server refused them or could not be reached',
    labelNames: ['lease'] as const,
    registers: [registry],
  }),
  reconcileErrors: new Counter({
    name: 'audit_controller_reconcile_errors_total',
    help: 'Reconciles that failed and are retried with backoff, by kind (its plural); a 409 conflict, retried at once, is not one',
    labelNames: ['kind'] as const,
    registers: [registry],
  }),
}));
