import { parser } from '@prometheus-io/lezer-promql';
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { CHART, byKind, helm, parseManifests, type Manifest } from '../support/helm.ts';
import { mintKey, startTestService, type TestService } from '../support/service.ts';

const run = promisify(execFile);
const RULE_KIND = 'monitoring.coreos.com/v1/PrometheusRule';
const RELEASE = ['template', 'rel', CHART, '--namespace', 'audit', '--set', 'secrets.existingSecret=audit-trail-env'];
/** The labels the Prometheus Operator gives what the release's ServiceMonitor scrapes. */
const SCRAPED = { job: 'rel-audit-trail-metrics', namespace: 'audit' };
const L = 'job="rel-audit-trail-metrics",namespace="audit"';

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

async function render(...extra: string[]): Promise<Manifest[]> {
  const result = await helm([...RELEASE, ...extra]);
  expect(result.code, result.stderr).to.equal(0);
  return parseManifests(result.stdout);
}

/** promtool from Debian's prometheus package (make services installs it); never throws for a failed check. */
async function promtool(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run('promtool', args, { cwd });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failure = error as { code: number | string; stdout?: string; stderr?: string };
    if (failure.code === 'ENOENT') throw new Error('promtool is missing: make services installs it (Debian package prometheus)');
    return { code: Number(failure.code), output: `${failure.stdout ?? ''}${failure.stderr ?? ''}` };
  }
}

/**
 * One alert's two cases for `promtool test rules`: input series (1 m apart), and when to look. `fires` names
 * the labels of the alert it must raise besides the rule's own; `quiet` must raise none (at its eval time, a
 * case near the threshold or within the rule's `for`).
 */
interface AlertCase {
  fires: { series: Record<string, string>; at: string; labels: Record<string, string> };
  quiet: { series: Record<string, string>; at: string };
}

const ALERT_CASES: Record<string, AlertCase> = {
  AuditTrailDependencyDown: {
    fires: {
      series: { [`audit_dependency_up{${L},pod="api-0",dependency="postgres"}`]: '1 1 0x8' },
      at: '5m',
      labels: { ...SCRAPED, pod: 'api-0', dependency: 'postgres' },
    },
    // Redis down is the fallback alert's; Postgres down for a minute is within the 2 m.
    quiet: {
      series: {
        [`audit_dependency_up{${L},pod="api-0",dependency="redis"}`]: '0x10',
        [`audit_dependency_up{${L},pod="api-1",dependency="postgres"}`]: '1 1 1 1 0 0',
      },
      at: '5m',
    },
  },
  AuditTrailRateLimiterFallback: {
    fires: {
      series: { [`audit_rate_limiter_fallback_active{${L},pod="api-0"}`]: '1x15' },
      at: '12m',
      labels: { ...SCRAPED, pod: 'api-0' },
    },
    quiet: { series: { [`audit_rate_limiter_fallback_active{${L},pod="api-0"}`]: '1x5 0x10' }, at: '12m' },
  },
  AuditTrailHighErrorRate: {
    fires: {
      series: {
        [`audit_http_request_duration_seconds_count{${L},pod="api-0",status="200"}`]: '0+100x20',
        [`audit_http_request_duration_seconds_count{${L},pod="api-0",status="503"}`]: '0+2x20',
      },
      at: '12m',
      labels: SCRAPED,
    },
    quiet: {
      series: {
        [`audit_http_request_duration_seconds_count{${L},pod="api-0",status="200"}`]: '0+100x20',
        [`audit_http_request_duration_seconds_count{${L},pod="api-0",status="500"}`]: '0+0.5x20',
      },
      at: '12m',
    },
  },
  AuditTrailSlowEventList: {
    fires: {
      series: {
        [`audit_http_request_duration_seconds_bucket{${L},route="/api/v2/public/audit/events",le="0.25"}`]: '0x20',
        [`audit_http_request_duration_seconds_bucket{${L},route="/api/v2/public/audit/events",le="0.5"}`]: '0+10x20',
        [`audit_http_request_duration_seconds_bucket{${L},route="/api/v2/public/audit/events",le="+Inf"}`]: '0+10x20',
      },
      at: '16m',
      labels: SCRAPED,
    },
    // The list is fast; a slow export is not the list.
    quiet: {
      series: {
        [`audit_http_request_duration_seconds_bucket{${L},route="/api/v2/public/audit/events",le="0.25"}`]: '0+10x20',
        [`audit_http_request_duration_seconds_bucket{${L},route="/api/v2/public/audit/events",le="+Inf"}`]: '0+10x20',
        [`audit_http_request_duration_seconds_bucket{${L},route="/api/v2/public/audit/export",le="0.25"}`]: '0x20',
        [`audit_http_request_duration_seconds_bucket{${L},route="/api/v2/public/audit/export",le="+Inf"}`]: '0+10x20',
      },
      at: '16m',
    },
  },
  AuditTrailIngestRejected: {
    fires: { series: { [`audit_errors_total{${L},pod="ingest-0",kind="ingest_rejected"}`]: '0 0 0 1x5' }, at: '5m', labels: SCRAPED },
    // Rejected half an hour ago, nothing since.
    quiet: { series: { [`audit_errors_total{${L},pod="ingest-0",kind="ingest_rejected"}`]: '0 3x40' }, at: '35m' },
  },
  AuditTrailDeliveryNotAttempted: {
    fires: { series: { [`audit_errors_total{${L},pod="worker-0",kind="delivery_not_attempted"}`]: '0 0 4x5' }, at: '4m', labels: SCRAPED },
    quiet: { series: { [`audit_errors_total{${L},pod="worker-0",kind="delivery_not_attempted"}`]: '0x20' }, at: '15m' },
  },
  AuditTrailRelayFailing: {
    fires: { series: { [`audit_errors_total{${L},pod="worker-0",kind="relay_failed"}`]: '0+1x30' }, at: '25m', labels: SCRAPED },
    // One failure, then none: it had no ten minutes of failures.
    quiet: { series: { [`audit_errors_total{${L},pod="worker-0",kind="relay_failed"}`]: '0 0 1x30' }, at: '25m' },
  },
  AuditTrailWorkersBehind: {
    fires: {
      series: {
        [`audit_webhook_relay_published_total{${L},pod="worker-0"}`]: '0+200x30',
        [`audit_webhook_delivery_attempts_total{${L},pod="worker-1",result="success"}`]: '0+100x30',
      },
      at: '25m',
      labels: SCRAPED,
    },
    quiet: {
      series: {
        [`audit_webhook_relay_published_total{${L},pod="worker-0"}`]: '0+120x30',
        [`audit_webhook_delivery_attempts_total{${L},pod="worker-1",result="success"}`]: '0+100x30',
      },
      at: '25m',
    },
  },
  AuditTrailWebhookEndpointAutoDisabled: {
    fires: { series: { [`audit_webhook_endpoints_auto_disabled_total{${L},pod="worker-0"}`]: '0 0 1x5' }, at: '5m', labels: SCRAPED },
    quiet: { series: { [`audit_webhook_endpoints_auto_disabled_total{${L},pod="worker-0"}`]: '0 1x90' }, at: '90m' },
  },
  AuditTrailWebhookEndpointSaturated: {
    fires: { series: { [`audit_webhook_deliveries_parked_total{${L},pod="worker-0"}`]: '0+5x45' }, at: '40m', labels: SCRAPED },
    // A burst of parking that ended: no endpoint is saturated now.
    quiet: { series: { [`audit_webhook_deliveries_parked_total{${L},pod="worker-0"}`]: '0+5x10 50x40' }, at: '40m' },
  },
  AuditTrailForeignDeliveryMessages: {
    fires: {
      series: { [`audit_errors_total{${L},pod="worker-0",kind="delivery_foreign_message"}`]: '0 0 1x5' },
      at: '4m',
      labels: SCRAPED,
    },
    quiet: { series: { [`audit_errors_total{${L},pod="worker-0",kind="delivery_foreign_message"}`]: '0x20' }, at: '15m' },
  },
  AuditTrailEventLoopLag: {
    fires: {
      series: { [`nodejs_eventloop_lag_p99_seconds{${L},pod="api-0"}`]: '0.5x15' },
      at: '12m',
      labels: { ...SCRAPED, pod: 'api-0' },
    },
    quiet: { series: { [`nodejs_eventloop_lag_p99_seconds{${L},pod="api-0"}`]: '0.05x15' }, at: '12m' },
  },
  AuditTrailStreamFailing: {
    fires: {
      series: { [`audit_stream_failing{${L},pod="streams-0",stream="str_a"}`]: '0 0 1x20' },
      at: '18m',
      labels: { ...SCRAPED, stream: 'str_a' },
    },
    // Refused for ten minutes, then fixed; and another stream that never failed.
    quiet: {
      series: {
        [`audit_stream_failing{${L},pod="streams-0",stream="str_a"}`]: '1x10 0x10',
        [`audit_stream_failing{${L},pod="streams-1",stream="str_b"}`]: '0x20',
      },
      at: '18m',
    },
  },
  AuditTrailStreamBehind: {
    // The destination down: the lag grows a minute a minute from 0.
    fires: {
      series: { [`audit_stream_lag_seconds{${L},pod="streams-0",stream="str_a"}`]: '0+60x30' },
      at: '27m',
      labels: { ...SCRAPED, stream: 'str_a' },
    },
    // Past 15 minutes for less than the 10 of `for`, then caught up; a stream keeping up at the sealing interval.
    quiet: {
      series: {
        [`audit_stream_lag_seconds{${L},pod="streams-0",stream="str_a"}`]: '0+60x20 5x10',
        [`audit_stream_lag_seconds{${L},pod="streams-1",stream="str_b"}`]: '12x30',
      },
      at: '27m',
    },
  },
  AuditTrailControllerNoLeader: {
    // Both replicas cannot take the Lease (a 400, a 403): neither leads.
    fires: {
      series: {
        [`audit_controller_leader{${L},pod="controller-0",lease="rel-audit-trail-controller"}`]: '0x10',
        [`audit_controller_leader{${L},pod="controller-1",lease="rel-audit-trail-controller"}`]: '0x10',
      },
      at: '7m',
      labels: SCRAPED,
    },
    // A failover: one replica leads at every moment but the one of the handover.
    quiet: {
      series: {
        [`audit_controller_leader{${L},pod="controller-0",lease="rel-audit-trail-controller"}`]: '1x3 0x7',
        [`audit_controller_leader{${L},pod="controller-1",lease="rel-audit-trail-controller"}`]: '0x3 1x7',
      },
      at: '9m',
    },
  },
  AuditTrailControllerCrdOutdated: {
    fires: {
      series: { [`audit_controller_crd_outdated{${L},pod="controller-0",crd="apikeys.audittrail.dev"}`]: '1x10' },
      at: '7m',
      labels: { ...SCRAPED, crd: 'apikeys.audittrail.dev' },
    },
    // Outdated for the minutes of an upgrade that applied the CRDs after the pods.
    quiet: {
      series: {
        [`audit_controller_crd_outdated{${L},pod="controller-0",crd="apikeys.audittrail.dev"}`]: '1x3 0x7',
        [`audit_controller_crd_outdated{${L},pod="controller-0",crd="webhookendpoints.audittrail.dev"}`]: '0x10',
      },
      at: '9m',
    },
  },
  AuditTrailControllerReconcileFailing: {
    fires: {
      series: { [`audit_controller_reconcile_errors_total{${L},pod="controller-0",kind="apikeys"}`]: '0+1x30' },
      at: '27m',
      labels: { ...SCRAPED, kind: 'apikeys' },
    },
    // A burst of failures (a database restart), then none.
    quiet: { series: { [`audit_controller_reconcile_errors_total{${L},pod="controller-0",kind="apikeys"}`]: '0 0 0 3x30' }, at: '27m' },
  },
  AuditTrailRetentionFailing: {
    fires: {
      series: {
        [`audit_expiry_runs_total{${L},pod="retention-0",outcome="failed"}`]: '0x60 1x60',
        [`audit_expiry_archives_total{${L},pod="retention-0",outcome="failed"}`]: '0x120',
      },
      at: '90m',
      labels: SCRAPED,
    },
    // A pass failed four hours ago: more than the three the alert looks back at the default interval.
    quiet: {
      series: {
        [`audit_expiry_runs_total{${L},pod="retention-0",outcome="failed"}`]: '0 1x300',
        [`audit_expiry_archives_total{${L},pod="retention-0",outcome="failed"}`]: '0x300',
      },
      at: '250m',
    },
  },
  AuditTrailSealingBehind: {
    // config.sealInterval is 10s by default: the threshold is 30 s.
    fires: { series: { [`audit_seal_oldest_unsealed_age_seconds{${L},pod="sealer-0"}`]: '0+60x10' }, at: '8m', labels: SCRAPED },
    quiet: { series: { [`audit_seal_oldest_unsealed_age_seconds{${L},pod="sealer-0"}`]: '25x10' }, at: '8m' },
  },
  AuditTrailTreeForked: {
    fires: {
      series: { [`audit_tree_forked{${L},pod="sealer-0",tenant_id="acme"}`]: '1x10' },
      at: '2m',
      labels: { ...SCRAPED, tenant_id: 'acme' },
    },
    quiet: { series: { [`audit_seal_oldest_unsealed_age_seconds{${L},pod="sealer-0"}`]: '0x10' }, at: '2m' },
  },
  AuditTrailNoSealer: {
    fires: { series: { [`audit_dependency_up{${L},pod="api-0",dependency="postgres"}`]: '1x20' }, at: '15m', labels: SCRAPED },
    quiet: { series: { [`audit_seal_oldest_unsealed_age_seconds{${L},pod="sealer-0"}`]: '0x20' }, at: '15m' },
  },
};

/** The rule's annotations as Prometheus renders them for an alert with these labels (they use only $labels). */
function renderedAnnotations(rule: Rule, labels: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(rule.annotations).map(([name, text]) => [
      name,
      text.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, label: string) => labels[label] ?? ''),
    ]),
  );
}

function promtoolTests(rule: Rule, cases: AlertCase): unknown {
  const series = (input: Record<string, string>) => Object.entries(input).map(([name, values]) => ({ series: name, values }));
  const firingLabels = { ...cases.fires.labels, ...rule.labels };
  return {
    rule_files: ['rules.yaml'],
    evaluation_interval: '1m',
    tests: [
      {
        name: `${rule.alert} fires`,
        interval: '1m',
        input_series: series(cases.fires.series),
        alert_rule_test: [
          {
            eval_time: cases.fires.at,
            alertname: rule.alert,
            exp_alerts: [{ exp_labels: firingLabels, exp_annotations: renderedAnnotations(rule, firingLabels) }],
          },
        ],
      },
      {
        name: `${rule.alert} stays quiet`,
        interval: '1m',
        input_series: series(cases.quiet.series),
        alert_rule_test: [{ eval_time: cases.quiet.at, alertname: rule.alert, exp_alerts: [] }],
      },
    ],
  };
}

/** The metric names a PromQL expression selects, from the official grammar (@prometheus-io/lezer-promql). */
function metricNames(expr: string): string[] {
  const names: string[] = [];
  parser.parse(expr).iterate({
    enter(node) {
      if (node.type.isError) throw new Error(`not PromQL at ${node.from}: ${expr}`);
      if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector') names.push(expr.slice(node.from, node.to));
    },
  });
  return names;
}

/** Every PromQL query of the dashboard, with Grafana's variables given values, so that promtool can read them. */
function dashboardQueries(dashboard: { panels: Array<{ title: string; targets?: Array<{ expr: string }> }> }): string[] {
  return dashboard.panels
    .flatMap((panel) => panel.targets ?? [])
    .map((target) => target.expr.replaceAll('$__rate_interval', '5m').replaceAll('$namespace', 'audit').replaceAll('$job', SCRAPED.job));
}

describe('Helm chart: alerts and dashboard for operators', function () {
  this.timeout(60_000);
  let workdir: string;
  let rules: Rule[];
  let manifests: Manifest[];
  let dashboard: { uid: string; panels: Array<{ title: string; targets?: Array<{ expr: string }> }> };

  before(async () => {
    manifests = await render(
      '--api-versions',
      RULE_KIND,
      '--set',
      'prometheusRule.enabled=true',
      '--set',
      'grafanaDashboard.enabled=true',
      // Off by default, on here so that every alert is rendered.
      '--set',
      'retention.enabled=true',
    );
    const [rule] = byKind(manifests, 'PrometheusRule');
    expect(rule, 'no PrometheusRule rendered').to.not.equal(undefined);
    rules = rule!.spec.groups.flatMap((group: { rules: Rule[] }) => group.rules);
    workdir = await mkdtemp(join(tmpdir(), 'audit-trail-rules-'));
    await writeFile(join(workdir, 'rules.yaml'), dump({ groups: rule!.spec.groups }));
    dashboard = JSON.parse(
      byKind(manifests, 'ConfigMap').find((map) => map.metadata.name === 'rel-audit-trail-dashboard')!.data['audit-trail.json'],
    );
  });

  after(async () => {
    if (workdir) await rm(workdir, { recursive: true, force: true });
  });

  it('renders the PrometheusRule only when enabled and where the cluster serves its kind', async () => {
    expect(byKind(await render('--set', 'prometheusRule.enabled=true'), 'PrometheusRule')).to.have.length(0);
    expect(byKind(await render('--api-versions', RULE_KIND), 'PrometheusRule')).to.have.length(0);
    const [rule] = byKind(manifests, 'PrometheusRule');
    const { PrometheusRule } = await import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule');
    new PrometheusRule(rule as never).validate();
    const labelled = await render(
      '--api-versions',
      RULE_KIND,
      '--set',
      'prometheusRule.enabled=true',
      '--set',
      'prometheusRule.labels.release=kps',
    );
    expect(byKind(labelled, 'PrometheusRule')[0]!.metadata.labels).to.include({ release: 'kps', 'app.kubernetes.io/instance': 'rel' });
  });

  it("selects the series of the release's own metrics Service, in its namespace", () => {
    const metricsService = byKind(manifests, 'Service').find(
      (service) => service.metadata.labels?.['app.kubernetes.io/component'] === 'metrics',
    );
    expect(metricsService?.metadata.name).to.equal(SCRAPED.job);
    for (const rule of rules) expect(rule.expr, rule.alert).to.include(L);
  });

  it('passes promtool check rules', async () => {
    const checked = await promtool(['check', 'rules', 'rules.yaml'], workdir);
    expect(checked.code, checked.output).to.equal(0);
    expect(checked.output).to.include(`SUCCESS: ${rules.length} rules found`);
  });

  it('has exactly the alerts docs/operations.md describes, each with a severity, a summary and a case here', async () => {
    expect(rules.map((rule) => rule.alert)).to.have.members(Object.keys(ALERT_CASES));
    for (const rule of rules) {
      expect(['page', 'ticket', 'info'], rule.alert).to.include(rule.labels.severity);
      expect(rule.annotations.summary, rule.alert).to.be.a('string').that.is.not.empty;
    }
    const operations = (await import('node:fs')).readFileSync('docs/operations.md', 'utf8');
    for (const rule of rules) expect(operations, `docs/operations.md does not name ${rule.alert}`).to.include(`\`${rule.alert}\``);
  });

  for (const [alert, cases] of Object.entries(ALERT_CASES)) {
    it(`${alert}: fires on its condition and stays quiet below it (promtool test rules)`, async () => {
      const rule = rules.find((candidate) => candidate.alert === alert);
      expect(rule, `no rule ${alert}`).to.not.equal(undefined);
      const file = `${alert}.test.yaml`;
      await writeFile(join(workdir, file), dump(promtoolTests(rule!, cases)));
      const tested = await promtool(['test', 'rules', file], workdir);
      expect(tested.code, tested.output).to.equal(0);
    });
  }

  it("scales the sealing alert's threshold with config.sealInterval, and drops the sealer's alerts without a sealer", async () => {
    const threshold = async (...extra: string[]) => {
      const [rule] = byKind(await render('--api-versions', RULE_KIND, '--set', 'prometheusRule.enabled=true', ...extra), 'PrometheusRule');
      return rule!.spec.groups
        .flatMap((group: { rules: Rule[] }) => group.rules)
        .find((candidate: Rule) => candidate.alert === 'AuditTrailSealingBehind')?.expr;
    };
    expect(await threshold()).to.match(/\) > 30$/);
    expect(await threshold('--set', 'config.sealInterval=1.5s')).to.match(/\) > 4\.5$/);
    expect(await threshold('--set', 'config.sealInterval=500ms')).to.match(/\) > 1\.5$/);
    expect(await threshold('--set', 'sealer.enabled=false')).to.equal(undefined);
  });

  it("drops the log streams' alerts where the chart runs no streams role", async () => {
    const alerts = async (...extra: string[]) => {
      const [rule] = byKind(await render('--api-versions', RULE_KIND, '--set', 'prometheusRule.enabled=true', ...extra), 'PrometheusRule');
      return rule!.spec.groups.flatMap((group: { rules: Rule[] }) => group.rules).map((candidate: Rule) => candidate.alert);
    };
    expect(await alerts()).to.include.members(['AuditTrailStreamFailing', 'AuditTrailStreamBehind']);
    const without = await alerts('--set', 'streams.enabled=false');
    expect(without).to.not.include.members(['AuditTrailStreamFailing']);
    expect(without).to.not.include.members(['AuditTrailStreamBehind']);
  });

  it("drops the controller's alerts without a controller, and the retention alert without the retention role", async () => {
    const alerts = async (...extra: string[]) => {
      const [rule] = byKind(await render('--api-versions', RULE_KIND, '--set', 'prometheusRule.enabled=true', ...extra), 'PrometheusRule');
      return rule!.spec.groups.flatMap((group: { rules: Rule[] }) => group.rules).map((candidate: Rule) => candidate.alert);
    };
    const controllerAlerts = ['AuditTrailControllerNoLeader', 'AuditTrailControllerCrdOutdated', 'AuditTrailControllerReconcileFailing'];
    expect(await alerts())
      .to.include.members(controllerAlerts)
      .and.not.include('AuditTrailRetentionFailing');
    expect(await alerts('--set', 'controller.enabled=false')).to.not.include.any.members(controllerAlerts);
    const window = async (interval: string) => {
      const [rule] = byKind(
        await render(
          '--api-versions',
          RULE_KIND,
          '--set',
          'prometheusRule.enabled=true',
          '--set',
          'retention.enabled=true',
          '--set',
          `retention.interval=${interval}`,
        ),
        'PrometheusRule',
      );
      const expr: string = rule!.spec.groups
        .flatMap((group: { rules: Rule[] }) => group.rules)
        .find((candidate: Rule) => candidate.alert === 'AuditTrailRetentionFailing').expr;
      return [...expr.matchAll(/\[(\d+s)\]/g)].map((match) => match[1]);
    };
    // Two intervals and an hour, at least three hours.
    expect(await window('1h')).to.deep.equal(['10800s', '10800s']);
    expect(await window('1d')).to.deep.equal(['176400s', '176400s']);
  });

  it('ships the dashboard as a ConfigMap with the Grafana sidecar label, in the namespace the sidecar watches', async () => {
    const [map] = byKind(manifests, 'ConfigMap').filter((candidate) => candidate.metadata.name === 'rel-audit-trail-dashboard');
    expect(map!.metadata.labels).to.include({ grafana_dashboard: '1' });
    expect(map!.metadata.namespace).to.equal('audit');
    const { ConfigMap } = await import('kubernetes-models/v1/ConfigMap');
    new ConfigMap(map as never).validate();
    expect(dashboard.uid).to.equal('audit-trail');
    const elsewhere = await render('--set', 'grafanaDashboard.enabled=true', '--set', 'grafanaDashboard.namespace=monitoring');
    expect(
      byKind(elsewhere, 'ConfigMap').find((candidate) => candidate.metadata.name === 'rel-audit-trail-dashboard')!.metadata.namespace,
    ).to.equal('monitoring');
    expect(byKind(await render(), 'ConfigMap').map((candidate) => candidate.metadata.name)).not.to.include('rel-audit-trail-dashboard');
  });

  it("has dashboard queries promtool reads, each panel's filtered to the chosen release", async () => {
    const queries = dashboardQueries(dashboard);
    expect(queries.length).to.be.greaterThan(15);
    for (const query of queries) expect(query).to.include(`job="${SCRAPED.job}"`).and.include(`namespace="${SCRAPED.namespace}"`);
    const asRules = { groups: [{ name: 'dashboard', rules: queries.map((expr, index) => ({ record: `dashboard:query${index}`, expr })) }] };
    await writeFile(join(workdir, 'dashboard-rules.yaml'), dump(asRules));
    const checked = await promtool(['check', 'rules', 'dashboard-rules.yaml'], workdir);
    expect(checked.code, checked.output).to.equal(0);
  });

  describe('against the /metrics of running roles', () => {
    let db: TestDatabase;
    let everyRole: TestService;
    let apiOnly: TestService;
    let exported: string;

    before(async () => {
      db = await createTestDatabase();
      const sealKey = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
      everyRole = await startTestService({
        databaseUrl: db.url,
        roles: ['api', 'ingest', 'relay', 'worker', 'sealer'],
        env: { SEAL_SIGNING_KEY: sealKey },
      });
      apiOnly = await startTestService({ databaseUrl: db.url, roles: ['api'] });
      // One list request, so that its route's series exists as the latency alert selects it.
      const { key } = await mintKey(db.url, { tenantId: 'metrics', scopes: ['audit:read'] });
      const listed = await fetch(`${everyRole.baseUrl}/audit/events?limit=1`, { headers: { authorization: `Bearer ${key}` } });
      expect(listed.status).to.equal(200);
      // audit_dependency_up is what the last readiness check found.
      expect((await fetch(`${everyRole.internalUrl}/readyz`)).status).to.equal(200);
      exported = await (await fetch(`${everyRole.internalUrl}/metrics`)).text();
    });

    after(async () => {
      await everyRole?.stop();
      await apiOnly?.stop();
      await db?.drop();
    });

    /**
     * The series names a /metrics text declares, from its `# TYPE` lines: a labelled counter has no sample
     * until it is first incremented, and is exported all the same.
     */
    const sampleNames = (text: string) =>
      new Set(
        [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap(([, name, type]) =>
          type === 'histogram'
            ? [`${name}_bucket`, `${name}_sum`, `${name}_count`]
            : type === 'summary'
              ? [name!, `${name}_sum`, `${name}_count`]
              : [name!],
        ),
      );

    it('names in the alerts and the dashboard only metrics the service exports', () => {
      const names = sampleNames(exported);
      const used = new Set([...rules.map((rule) => rule.expr), ...dashboardQueries(dashboard)].flatMap(metricNames));
      expect(used.size).to.be.greaterThan(12);
      expect([...used].filter((name) => !names.has(name))).to.deep.equal([]);
    });

    it('exports the labels the alerts select: the list route, the dependencies, the alerted error kinds from zero', () => {
      expect(exported).to.match(/audit_http_request_duration_seconds_bucket\{[^}]*route="\/api\/v2\/public\/audit\/events"/);
      for (const dependency of ['postgres', 'nats']) expect(exported).to.include(`audit_dependency_up{dependency="${dependency}"}`);
      for (const kind of ['ingest_rejected', 'delivery_not_attempted', 'relay_failed', 'delivery_foreign_message'])
        expect(exported).to.include(`audit_errors_total{kind="${kind}"} 0`);
    });

    it('exports the seal age from sealer processes only, which AuditTrailNoSealer relies on', async () => {
      expect(exported).to.match(/^audit_seal_oldest_unsealed_age_seconds \d/m);
      const api = await (await fetch(`${apiOnly.internalUrl}/metrics`)).text();
      expect(sampleNames(api).has('audit_seal_oldest_unsealed_age_seconds')).to.equal(false);
      expect(sampleNames(api).has('audit_http_request_duration_seconds_bucket')).to.equal(true);
    });
  });
});
