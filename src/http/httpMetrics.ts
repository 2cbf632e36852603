import { Gauge, Histogram, type Registry } from 'prom-client';
import { registerDeprecatedNames } from '../platform/deprecatedMetricNames.ts';
import { featureMetrics } from '../platform/metrics.ts';

/** The HTTP ports' metrics: request durations by route template, and what the last readiness check found. */
export const httpMetrics = featureMetrics((registry: Registry) => {
  const requestDuration = new Histogram({
    name: 'audit_http_request_duration_seconds',
    help: 'HTTP request duration by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const dependencyUp = new Gauge({
    name: 'audit_dependency_up',
    help: '1 when the dependency answered the last readiness check, else 0',
    labelNames: ['dependency'] as const,
    registers: [registry],
  });
  // Renamed under audit_; the old name stays for one release.
  registerDeprecatedNames(registry, [requestDuration]);
  return { requestDuration, dependencyUp };
});
