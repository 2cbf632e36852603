import type { Metric, MetricObjectWithValues, MetricValue, Registry } from 'prom-client';

/**
 * The families renamed under the `audit_` prefix keep their old names for one release, so that dashboards
 * and alerts written against them go on working while they move: the old family is the new one's values
 * under the old name (`audit_webhook_…_total` → `webhook_…_total`, its buckets and sums too), read at each
 * scrape, its HELP saying it is deprecated and what replaces it. Remove in the release after the rename.
 */

const PREFIX = 'audit_';

/** The families, each registered again under its name without `audit_`. */
export function registerDeprecatedNames(registry: Registry, metrics: readonly Metric[]): void {
  for (const metric of metrics) registry.registerMetric(deprecatedAlias(metric));
}

function deprecatedAlias(metric: Metric): Metric {
  const source = metric as unknown as {
    name: string;
    help: string;
    type: string;
    aggregator: string;
    get(): Promise<MetricObjectWithValues<MetricValue<string>>>;
  };
  if (!source.name.startsWith(PREFIX)) throw new Error(`${source.name} has no ${PREFIX} prefix to drop`);
  const name = source.name.slice(PREFIX.length);
  const alias = {
    name,
    help: `Deprecated: renamed ${source.name}, and removed in the next release. ${source.help}`,
    type: source.type,
    aggregator: source.aggregator,
    async get() {
      const current = await source.get();
      return {
        ...current,
        name,
        help: alias.help,
        values: current.values.map((value) => {
          const metricName = (value as { metricName?: string }).metricName;
          return metricName === undefined ? value : { ...value, metricName: metricName.slice(PREFIX.length) };
        }),
      };
    },
  };
  return alias as unknown as Metric;
}
