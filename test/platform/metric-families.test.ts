import { expect } from 'chai';
import { Counter, Registry } from 'prom-client';
import { deliveryMetrics } from '../../src/delivery/deliveryMetrics.ts';
import { featureMetrics, ServiceMetrics } from '../../src/platform/metrics.ts';
import { declareMetricFamilies } from '../../src/roles/metricFamilies.ts';

/**
 * Every family a process exports from its start, whichever roles it runs: the names and labels the chart's
 * alerts and dashboards select (charts/audit-trail), declared by each feature in its own folder.
 */
const FAMILIES: Record<string, string[]> = {
  audit_http_request_duration_seconds: ['route', 'method', 'status'],
  audit_events_ingested_total: ['source'],
  audit_errors_total: ['kind'],
  audit_dependency_up: ['dependency'],
  audit_rate_limiter_fallback_active: [],
  audit_webhook_delivery_attempts_total: ['result'],
  audit_webhook_delivery_attempt_duration_seconds: [],
  audit_webhook_deliveries_deferred_total: [],
  audit_webhook_deliveries_parked_total: [],
  audit_webhook_deliveries_unparked_total: ['by'],
  audit_webhook_endpoints_auto_disabled_total: [],
  audit_webhook_rate_limit_fallback_active: [],
  audit_webhook_relay_published_total: [],
  audit_webhook_relay_republished_total: [],
  audit_events_sealed_total: [],
  audit_events_expired_total: [],
  audit_expiry_archives_total: ['outcome'],
  audit_expiry_runs_total: ['outcome'],
  audit_stream_events_delivered_total: ['stream'],
  audit_stream_batches_failed_total: ['stream', 'outcome'],
  audit_stream_lag_events: ['stream'],
  audit_stream_lag_seconds: ['stream'],
  audit_stream_failing: ['stream'],
  audit_controller_crd_outdated: ['crd'],
  audit_controller_leader: ['lease'],
  audit_controller_lease_errors_total: ['lease'],
  audit_controller_reconcile_errors_total: ['kind'],
  audit_long_reads_active: [],
  audit_long_reads_refused_total: ['limit'],
  audit_live_streams_active: [],
  audit_live_streams_refused_total: ['limit'],
};
/** Renamed under audit_ and still exported under their old names for one release. */
const DEPRECATED = [
  'http_request_duration_seconds',
  'rate_limiter_fallback_active',
  'webhook_delivery_attempts_total',
  'webhook_delivery_attempt_duration_seconds',
  'webhook_deliveries_deferred_total',
  'webhook_deliveries_parked_total',
  'webhook_deliveries_unparked_total',
  'webhook_endpoints_auto_disabled_total',
  'webhook_relay_published_total',
  'webhook_relay_republished_total',
];

describe('the metric families of a process', () => {
  it('declares every feature’s families at start, with the names and labels the chart selects', async () => {
    const metrics = new ServiceMetrics();
    declareMetricFamilies(metrics);
    const exported = new Map((await metrics.registry.getMetricsAsJSON()).map((family) => [family.name, family]));
    for (const [name, labels] of Object.entries(FAMILIES)) {
      expect(exported.has(name), name).to.equal(true);
      const declared = (metrics.registry.getSingleMetric(name) as unknown as { labelNames: string[] }).labelNames;
      expect(declared, name).to.deep.equal(labels);
    }
    for (const name of DEPRECATED) expect(exported.get(name)?.help, name).to.match(new RegExp(`^Deprecated: renamed audit_${name}`));
  });

  it('exports the alerted error kinds at 0 from the start', async () => {
    const text = await new ServiceMetrics().registry.getSingleMetricAsString('audit_errors_total');
    for (const kind of ['ingest_rejected', 'delivery_not_attempted', 'relay_failed', 'delivery_foreign_message'])
      expect(text).to.include(`audit_errors_total{kind="${kind}"} 0`);
  });

  it('gives every part of a process one set of a feature’s metrics, so that roles count into the same series', async () => {
    const metrics = new ServiceMetrics();
    // The ingest's publisher and the relay, in one process.
    deliveryMetrics(metrics).published.inc(2);
    deliveryMetrics({ registry: metrics.registry }).published.inc(3);
    expect(await metrics.registry.getSingleMetricAsString('audit_webhook_relay_published_total')).to.include(
      'audit_webhook_relay_published_total 5',
    );
    expect(() => declareMetricFamilies(metrics)).not.to.throw();
    // Another service's registry has series of its own.
    expect(deliveryMetrics(new ServiceMetrics())).not.to.equal(deliveryMetrics(metrics));
  });

  it('declares a feature’s metrics on a registry once, when first asked for', () => {
    let declarations = 0;
    const counted = featureMetrics((registry: Registry) => {
      declarations += 1;
      return new Counter({ name: 'audit_test_total', help: 'test', registers: [registry] });
    });
    const registry = new Registry();
    expect(registry.getSingleMetric('audit_test_total')).to.equal(undefined);
    counted({ registry }).inc();
    counted({ registry }).inc();
    expect(declarations).to.equal(1);
    expect(registry.getSingleMetric('audit_test_total')).not.to.equal(undefined);
  });
});
