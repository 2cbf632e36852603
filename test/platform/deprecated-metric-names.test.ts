import { expect } from 'chai';
import { Counter, Histogram, Registry } from 'prom-client';
import { registerDeprecatedNames } from '../../src/platform/deprecatedMetricNames.ts';

// Renamed families keep their old names for a release, so that dashboards and alerts go on working meanwhile.
describe('deprecated metric names', () => {
  it('exposes each family under its old name too, with the same values read at the scrape', async () => {
    const registry = new Registry();
    const counter = new Counter({
      name: 'audit_webhook_deliveries_total',
      help: 'Deliveries',
      labelNames: ['outcome'],
      registers: [registry],
    });
    registerDeprecatedNames(registry, [counter]);
    counter.inc({ outcome: 'delivered' }, 3);
    const text = await registry.metrics();
    expect(text).to.include('audit_webhook_deliveries_total{outcome="delivered"} 3');
    expect(text).to.include('\nwebhook_deliveries_total{outcome="delivered"} 3');
    expect(text).to.include(
      '# HELP webhook_deliveries_total Deprecated: renamed audit_webhook_deliveries_total, and removed in the next release. Deliveries',
    );
    expect(text).to.include('# TYPE webhook_deliveries_total counter');
  });

  it('renames a histogram’s buckets, sum and count as well', async () => {
    const registry = new Registry();
    const histogram = new Histogram({ name: 'audit_webhook_latency_seconds', help: 'Latency', buckets: [0.1, 1], registers: [registry] });
    registerDeprecatedNames(registry, [histogram]);
    histogram.observe(0.5);
    const text = await registry.metrics();
    for (const line of ['webhook_latency_seconds_bucket{le="1"} 1', 'webhook_latency_seconds_sum 0.5', 'webhook_latency_seconds_count 1'])
      expect(text).to.include(`\n${line}`);
  });

  it('refuses a family without the audit_ prefix: it has no old name', () => {
    const registry = new Registry();
    const counter = new Counter({ name: 'deliveries_total', help: 'Deliveries', registers: [registry] });
    expect(() => registerDeprecatedNames(registry, [counter])).to.throw('deliveries_total has no audit_ prefix to drop');
  });
});
