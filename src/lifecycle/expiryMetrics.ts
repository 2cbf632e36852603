import { Counter, type Registry } from 'prom-client';
import { featureMetrics } from '../platform/metrics.ts';

/** The expiry passes' metrics (lifecycle/expiry.ts): their runs, the archives written first, the events removed. */
export const expiryMetrics = featureMetrics((registry: Registry) => ({
  eventsExpired: new Counter({
    name: 'audit_events_expired_total',
    help: 'Events removed because their retention period was over and no legal hold covered them',
    registers: [registry],
  }),
  archives: new Counter({
    name: 'audit_expiry_archives_total',
    help: 'Archive objects written before expiry, by outcome (written: read back intact; failed: nothing of the range expired)',
    labelNames: ['outcome'],
    registers: [registry],
  }),
  runs: new Counter({
    name: 'audit_expiry_runs_total',
    help: 'Expiry passes over every tenant (or one), by outcome',
    labelNames: ['outcome'],
    registers: [registry],
  }),
}));
