import { Counter, type Registry } from 'prom-client';
import { featureMetrics } from '../platform/metrics.ts';

/** The trail's own count: events stored, by the input they came through. */
export const eventMetrics = featureMetrics((registry: Registry) => ({
  ingested: new Counter({
    name: 'audit_events_ingested_total',
    help: 'Audit events stored, by input (http, jetstream, internal)',
    labelNames: ['source'] as const,
    registers: [registry],
  }),
}));
