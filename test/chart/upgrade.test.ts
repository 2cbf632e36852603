import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { startHelmCluster, type HelmCluster } from '../support/helm-cluster.ts';
import { CHART, byKind, helm, parseManifests, podSpecs, type Manifest } from '../support/helm.ts';

/**
 * The previous release's chart, as users have it installed: `helm package` of charts/audit-trail at 69f0798,
 * the last commit of main before the upgrade-safety changes (issue 29):
 *   git archive 69f0798 charts/audit-trail | tar -x -C /tmp/prev && helm package /tmp/prev/charts/audit-trail
 * Replace it with the newest released chart whenever a release is cut.
 */
const PREVIOUS = 'test/chart/fixtures/audit-trail-0.1.0-69f0798.tgz';

/** Values both charts accept (the previous schema refuses what it does not know), with the options that touch names. */
const VALUE_SETS: Record<string, string[]> = {
  'an existing Secret': ['--set', 'secrets.existingSecret=audit-trail-env'],
  'every namespace-scoped option': [
    '--set',
    'secrets.existingSecret=audit-trail-env',
    '--set',
    'controller.watchNamespaces={team-a,team-b}',
    '--set',
    'api.autoscaling.enabled=true',
    '--set',
    'networkPolicy.enabled=true',
    '--set',
    'crds.enabled=true',
  ],
};

async function renderChart(chart: string, release: string, values: string[]): Promise<Manifest[]> {
  const result = await helm(['template', release, chart, '--namespace', 'audit', ...values]);
  expect(result.code, `${chart}: ${result.stderr}`).to.equal(0);
  return parseManifests(result.stdout);
}

/** What an object must keep across an upgrade, by kind/name. */
function selectors(manifests: Manifest[]): Record<string, unknown> {
  return Object.fromEntries(
    manifests
      .filter((manifest) => ['Deployment', 'PodDisruptionBudget', 'Service'].includes(manifest.kind))
      .map((manifest) => [`${manifest.kind}/${manifest.metadata.name}`, manifest.spec.selector]),
  );
}

/** The keys of `secret` that pods read without `optional: true` (a pod without one never starts). */
function requiredKeys(manifests: Manifest[], secret: string): string[] {
  const keys = podSpecs(manifests).flatMap(({ spec }) =>
    [...(spec.initContainers ?? []), ...spec.containers].flatMap((container: { env?: Array<{ valueFrom?: any }> }) =>
      (container.env ?? [])
        .map((variable) => variable.valueFrom?.secretKeyRef)
        .filter((reference) => reference?.name === secret && reference.optional !== true)
        .map((reference) => reference.key as string),
    ),
  );
  return [...new Set(keys)].sort();
}

describe('upgrading from the previous chart', function () {
  this.timeout(120_000);

  for (const [what, values] of Object.entries(VALUE_SETS)) {
    it(`keeps every selector Kubernetes refuses to change, and the Lease, with ${what}`, async () => {
      for (const release of ['audit-trail', 'rel']) {
        const previous = await renderChart(PREVIOUS, release, values);
        const next = await renderChart(CHART, release, values);
        // A Deployment's selector is immutable: a changed one fails the upgrade. Services and PDBs would
        // silently select nothing for a moment.
        const before = selectors(previous);
        const after = selectors(next);
        // Only the role added since (streams) brings objects of its own; every earlier one keeps its selector.
        const added = Object.keys(after).filter((name) => !(name in before));
        expect(
          added.every((name) => name.endsWith('-streams') || name.endsWith('-streams-internal')),
          added.join(', '),
        ).to.equal(true);
        expect(Object.fromEntries(Object.entries(after).filter(([name]) => name in before))).to.deep.equal(before);
        // The same Lease as before: the roll-out keeps one leader (old and new replicas compete for one Lease).
        const lease = (manifests: Manifest[]) =>
          manifests
            .find((manifest) => manifest.kind === 'Deployment' && manifest.metadata.name.endsWith('-controller'))!
            .spec.template.spec.containers[0].env.find((variable: { name: string }) => variable.name === 'CONTROLLER_LEASE_NAME').value;
        expect(lease(next), release).to.equal(lease(previous));
      }
    });
  }

  it('reads no key of an existing Secret that the previous chart did not, and the upgrade notes list every key it reads', async () => {
    const values = VALUE_SETS['an existing Secret']!;
    const previous = requiredKeys(await renderChart(PREVIOUS, 'rel', values), 'audit-trail-env');
    const next = requiredKeys(await renderChart(CHART, 'rel', values), 'audit-trail-env');
    expect(next.length).to.be.greaterThan(5);
    expect(
      next.filter((key) => !previous.includes(key)),
      'new keys an upgrade would need',
    ).to.deep.equal([]);
    const withoutSealer = requiredKeys(await renderChart(CHART, 'rel', [...values, '--set', 'sealer.enabled=false']), 'audit-trail-env');
    expect(next.filter((key) => !withoutSealer.includes(key))).to.deep.equal(['SEAL_SIGNING_KEY']);

    // The paragraph operators read before upgrading names exactly these keys, and so do the Argo CD example
    // (its Secret comes from a secret manager) and the values' comment.
    const operations = readFileSync('docs/operations.md', 'utf8');
    const notes = /\*\*Keys of the Secret\*\*[\s\S]*?\n\n/.exec(operations)?.[0] ?? '';
    const named = (text: string) => [...new Set([...text.matchAll(/\b[A-Z][A-Z_]{5,}\b/g)].map((match) => match[0]))].sort();
    expect(named(notes).filter((key) => key !== 'SECRET')).to.deep.equal(next);
    const argocd = readFileSync('docs/examples/argocd-application.yaml', 'utf8');
    for (const key of next) expect(argocd, `argocd-application.yaml names ${key}`).to.match(new RegExp(`\\b${key}\\b`));
    const valuesComment = readFileSync(`${CHART}/values.yaml`, 'utf8').split('secrets:')[0]!;
    for (const key of next) expect(valuesComment, `values.yaml names ${key}`).to.include(key);
  });

  it('ships CRDs that carry their schema version and ask Helm, Argo CD and Flux to keep them, which the previous ones did not', async () => {
    const crds = (text: string) => byKind(parseManifests(text), 'CustomResourceDefinition');
    const rendered = async (chart: string) => {
      const result = await helm(['template', 'rel', chart, '--namespace', 'audit', '--include-crds', ...VALUE_SETS['an existing Secret']!]);
      expect(result.code, result.stderr).to.equal(0);
      return crds(result.stdout);
    };
    for (const crd of await rendered(PREVIOUS))
      expect(crd.metadata.annotations ?? {}).not.to.have.property('audittrail.dev/schema-version');
    const next = await rendered(CHART);
    expect(next).to.have.length(readdirSync('crds').length);
    for (const crd of next) {
      expect(crd.metadata.annotations).to.include({
        'helm.sh/resource-policy': 'keep',
        'argocd.argoproj.io/sync-options': 'Delete=false,Prune=false',
        'kustomize.toolkit.fluxcd.io/prune': 'disabled',
      });
      expect(crd.metadata.annotations!['audittrail.dev/schema-version']).to.match(/^[1-9][0-9]*$/);
    }
  });

  describe('against a cluster (helm upgrade, --dry-run=server)', () => {
    let cluster: HelmCluster;
    before(async () => {
      cluster = await startHelmCluster();
    });
    after(async () => {
      await cluster?.stop();
    });

    const upgrade = (...extra: string[]) =>
      cluster.render('rel', 'audit', ['--is-upgrade', '--set', 'secrets.existingSecret=audit-trail-env', ...extra]);
    const ALL_BUT_SEAL = {
      DATABASE_URL: 'postgres://audit_trail@pg:5432/audit_trail',
      REDIS_URL: 'redis://redis:6379',
      NATS_URL: 'nats://nats:4222',
      KEY_PEPPER: 'p'.repeat(40),
      SECRET_ENCRYPTION_KEY: 'ab'.repeat(32),
      INGEST_TOKENS: 't'.repeat(30),
    };

    it('refuses an upgrade whose existing Secret lacks a key the pods read, naming it, before anything changes', async () => {
      // A Secret written for a release before the sealer.
      cluster.putSecret({ metadata: { name: 'audit-trail-env', namespace: 'audit' }, stringData: ALL_BUT_SEAL });
      const refused = await upgrade();
      expect(refused.code).not.to.equal(0);
      expect(refused.stderr).to.include('secrets.existingSecret: Secret audit/audit-trail-env has no SEAL_SIGNING_KEY');
      expect(refused.stderr).to.include('or set sealer.enabled=false until then');
      // Without the sealer it needs no signing key; with the key added, the upgrade goes ahead.
      expect((await upgrade('--set', 'sealer.enabled=false')).code).to.equal(0);
      cluster.putSecret({
        metadata: { name: 'audit-trail-env', namespace: 'audit' },
        stringData: { ...ALL_BUT_SEAL, SEAL_SIGNING_KEY: 'a key' },
      });
      const accepted = await upgrade();
      expect(accepted.code, accepted.stderr).to.equal(0);
    });

    it('names every missing key at once, and does not check a Secret that is not there yet (a secret manager may write it later)', async () => {
      cluster.putSecret({ metadata: { name: 'audit-trail-env', namespace: 'audit' }, stringData: { DATABASE_URL: 'postgres://pg/x' } });
      const refused = await upgrade();
      expect(refused.stderr).to.include(
        'has no REDIS_URL, NATS_URL, KEY_PEPPER, SECRET_ENCRYPTION_KEY, INGEST_TOKENS, SEAL_SIGNING_KEY, which this chart',
      );
      cluster.remove('v1', 'Secret', 'audit-trail-env', 'audit');
      const absent = await upgrade();
      expect(absent.code, absent.stderr).to.equal(0);
    });
  });
});

describe('the chart in a cluster shared by several releases', function () {
  this.timeout(120_000);

  it('names what lies outside its namespace after the release namespace, so one release name fits in two namespaces', async () => {
    const outside = async (namespace: string, ...values: string[]) => {
      const result = await helm([
        'template',
        'audit-trail',
        CHART,
        '--namespace',
        namespace,
        '--set',
        'secrets.existingSecret=env',
        ...values,
      ]);
      expect(result.code, result.stderr).to.equal(0);
      return parseManifests(result.stdout)
        .filter((manifest) => ['ClusterRole', 'ClusterRoleBinding'].includes(manifest.kind) || manifest.metadata.namespace !== undefined)
        .map((manifest) => `${manifest.kind}/${manifest.metadata.namespace ?? ''}/${manifest.metadata.name}`);
    };
    for (const values of [[], ['--set', 'controller.watchNamespaces={team-a}']]) {
      const staging = await outside('staging', ...values);
      const production = await outside('production', ...values);
      expect(staging.length).to.be.at.least(2);
      expect(
        staging.filter((name) => production.includes(name)),
        values.join(' '),
      ).to.deep.equal([]);
    }
  });

  describe('only one release manages the CRDs', () => {
    let cluster: HelmCluster;
    before(async () => {
      cluster = await startHelmCluster();
    });
    after(async () => {
      await cluster?.stop();
    });

    const install = (release: string, namespace: string) =>
      cluster.render(release, namespace, ['--set', 'secrets.existingSecret=env', '--set', 'crds.enabled=true']);
    const putCrds = (annotations: Record<string, string>, labels: Record<string, string> = {}) => {
      for (const plural of ['apikeys', 'webhookendpoints', 'auditlogstreams']) {
        cluster.put({
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: `${plural}.audittrail.dev`, annotations, labels },
        });
      }
    };

    it('lets the release that manages them upgrade them, and refuses a second release naming the first', async () => {
      expect((await install('production', 'audit')).code, 'a first install').to.equal(0);
      putCrds(
        { 'meta.helm.sh/release-name': 'production', 'meta.helm.sh/release-namespace': 'audit' },
        { 'app.kubernetes.io/managed-by': 'Helm' },
      );
      const upgrade = await install('production', 'audit');
      expect(upgrade.code, upgrade.stderr).to.equal(0);
      const second = await install('staging', 'audit-staging');
      expect(second.code).not.to.equal(0);
      expect(second.stderr).to.include(
        'crds.enabled: CRD apikeys.audittrail.dev is managed by release production in namespace audit; only one release per cluster manages the CRDs',
      );
      expect(second.stderr).to.include('Set crds.enabled=false for this release (staging in audit-staging)');
      // The same release name in another namespace is another release.
      expect((await install('production', 'elsewhere')).stderr).to.include('is managed by release production in namespace audit');
    });

    it('refuses to take over CRDs applied outside Helm, saying how to adopt them', async () => {
      putCrds({ 'audittrail.dev/schema-version': '1' });
      const refused = await install('production', 'audit');
      expect(refused.code).not.to.equal(0);
      expect(refused.stderr).to.include('crds.enabled: CRD apikeys.audittrail.dev exists and no Helm release manages it');
      expect(refused.stderr).to.include('meta.helm.sh/release-name=production meta.helm.sh/release-namespace=audit');
    });
  });
});
