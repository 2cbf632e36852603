import { Gauge, type Registry } from 'prom-client';
import { registerDeprecatedNames } from '../platform/deprecatedMetricNames.ts';
import { featureMetrics } from '../platform/metrics.ts';

/** Whether the API's rate limits fell back to each instance's memory (auth/rateLimiter.ts). */
export const rateLimiterMetrics = featureMetrics((registry: Registry) => {
  const fallback = new Gauge({
    name: 'audit_rate_limiter_fallback_active',
    help: '1 while Redis is unreachable and rate limits are enforced per instance in memory',
    registers: [registry],
  });
  // Renamed under audit_; the old name stays for one release.
  registerDeprecatedNames(registry, [fallback]);
  return { fallback };
});
