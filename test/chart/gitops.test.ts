import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { dump, load, loadAll } from 'js-yaml';
import { chartVersion } from '../../scripts/record-chart-version.ts';
import { startHelmCluster, type HelmCluster } from '../support/helm-cluster.ts';
import { CHART, byKind, helm, named, parseManifests, podSpecs, type Manifest } from '../support/helm.ts';

/** The project's version: the chart's appVersion, and so the default image tag. */
const APP_VERSION = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;

const run = promisify(execFile);
const ALL_OPTIONS = 'test/chart/all-options.yaml';

/** `helm template` without a cluster; with --include-crds, as Argo CD runs it. */
async function template(args: string[], options: { includeCrds: boolean } = { includeCrds: true }): Promise<string> {
  const result = await helm([
    'template',
    'rel',
    CHART,
    '--namespace',
    'audit',
    ...(options.includeCrds ? ['--include-crds'] : []),
    ...args,
  ]);
  expect(result.code, result.stderr).to.equal(0);
  return result.stdout;
}

/** A Go duration as Flux writes it (1h30m, 15m, 90s) in seconds. */
function durationSeconds(text: string): number {
  const units: Record<string, number> = { h: 3600, m: 60, s: 1 };
  const parts = [...String(text).matchAll(/(\d+)([hms])/g)];
  expect(parts.length, `a duration: ${text}`).to.be.greaterThan(0);
  return parts.reduce((sum, [, amount, unit]) => sum + Number(amount) * units[unit!]!, 0);
}

describe('Helm chart for GitOps: stable renders, secrets, subcharts, CRD upgrades', function () {
  this.timeout(120_000);
  const temporary: string[] = [];
  const temporaryDirectory = (name: string) => {
    const directory = mkdtempSync(join(tmpdir(), `audit-trail-${name}-`));
    temporary.push(directory);
    return directory;
  };
  after(() => {
    for (const directory of temporary) rmSync(directory, { recursive: true, force: true });
  });

  describe('secrets', () => {
    it('renders byte-identical output twice for the same values', async () => {
      const sealKey = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
      const given = [
        '--set',
        `secrets.keyPepper=${'p'.repeat(40)}`,
        '--set',
        `secrets.secretEncryptionKey=${'b2'.repeat(32)}`,
        '--set',
        `secrets.ingestTokens=${'t'.repeat(30)}`,
        '--set',
        `secrets.sealSigningKey=${sealKey}`,
      ];
      for (const args of [
        ['--set', 'secrets.existingSecret=audit-trail-env'],
        ['-f', ALL_OPTIONS],
        given,
        [...given, '--set', 'crds.enabled=true'],
      ]) {
        const first = await template(args);
        expect(await template(args), args.join(' ')).to.equal(first);
      }
    });

    it('refuses to render without a cluster when it would have to generate secrets, saying what to set', async () => {
      const result = await helm(['template', 'rel', CHART, '--namespace', 'audit']);
      expect(result.code).not.to.equal(0);
      expect(result.stderr).to.include(
        'rendering without access to the cluster (helm template, Argo CD, --dry-run=client) cannot generate KEY_PEPPER',
      );
      expect(result.stderr).to.include('Set secrets.existingSecret to a Secret you manage');
      // One secret given is not enough: the others would still be generated.
      const partial = await helm(['template', 'rel', CHART, '--set', `secrets.keyPepper=${'p'.repeat(40)}`]);
      expect(partial.stderr).to.include('cannot generate');
    });

    describe('against a cluster (helm install/upgrade, --dry-run=server)', () => {
      let cluster: HelmCluster;
      before(async () => {
        cluster = await startHelmCluster();
      });
      after(async () => {
        await cluster?.stop();
      });

      const serverRender = async (...extra: string[]) => {
        const result = await cluster.render('rel', 'audit', extra);
        return { ...result, manifests: result.code === 0 ? parseManifests(result.stdout) : [] };
      };

      it('generates the secrets on the first install, then reads them back: the upgrade renders what the install did', async () => {
        const install = await serverRender();
        expect(install.code, install.stderr).to.equal(0);
        expect(cluster.requests).to.include('GET /api/v1/namespaces/audit/secrets');
        const secret = named(install.manifests, 'Secret', 'rel-audit-trail-env');
        expect(secret.stringData.KEY_PEPPER).to.match(/^[A-Za-z0-9]{48}$/);
        expect(secret.stringData.SECRET_ENCRYPTION_KEY).to.match(/^[0-9a-f]{64}$/);
        expect(secret.stringData.INGEST_TOKENS).to.have.length.of.at.least(24);
        expect(createPrivateKey(secret.stringData.SEAL_SIGNING_KEY).asymmetricKeyType).to.equal('ed25519');
        expect(secret.metadata.annotations).to.deep.equal({ 'helm.sh/resource-policy': 'keep' });

        cluster.putSecret({ metadata: { name: 'rel-audit-trail-env', namespace: 'audit' }, stringData: secret.stringData });
        const upgrade = await serverRender('--is-upgrade');
        expect(upgrade.code, upgrade.stderr).to.equal(0);
        expect(upgrade.stdout).to.equal(install.stdout);
        // A URL changed in the values is taken; the generated secrets stay.
        const moved = await serverRender('--is-upgrade', '--set', 'secrets.redisUrl=rediss://redis.internal:6380');
        expect(named(moved.manifests, 'Secret', 'rel-audit-trail-env').stringData).to.deep.equal({
          ...secret.stringData,
          REDIS_URL: 'rediss://redis.internal:6380',
        });
      });

      it('refuses an upgrade that finds the Secret gone instead of generating new keys', async () => {
        const result = await serverRender('--is-upgrade', '--namespace', 'elsewhere');
        expect(result.code).not.to.equal(0);
        expect(result.stderr).to.include('secrets: Secret rel-audit-trail-env is missing on upgrade');
      });
    });

    const exampleValues = (file: string, kind: string, pick: (document: any) => unknown) => {
      const document = (loadAll(readFileSync(file, 'utf8')) as any[]).find((candidate) => candidate?.kind === kind);
      expect(document, `${kind} in ${file}`).not.to.equal(undefined);
      const values = join(temporaryDirectory('example-values'), 'values.yaml');
      writeFileSync(values, dump(pick(document)));
      return { document, values };
    };

    it('renders the Argo CD Application of docs/examples the way Argo CD does, identically every time', async () => {
      const { document, values } = exampleValues(
        'docs/examples/argocd-application.yaml',
        'Application',
        (application) => application.spec.source.helm.valuesObject,
      );
      expect(document.apiVersion).to.equal('argoproj.io/v1alpha1');
      expect(document.spec.source.path).to.equal(CHART);
      const args = [
        'template',
        document.spec.source.helm.releaseName,
        CHART,
        '--namespace',
        document.spec.destination.namespace,
        '--include-crds',
        // Argo CD tells helm template the kinds its cluster serves; this one runs the Prometheus Operator.
        '--api-versions',
        'monitoring.coreos.com/v1/ServiceMonitor',
        '-f',
        values,
      ];
      const first = await helm(args);
      expect(first.code, first.stderr).to.equal(0);
      expect((await helm(args)).stdout).to.equal(first.stdout);
      const manifests = parseManifests(first.stdout);
      const crds = byKind(manifests, 'CustomResourceDefinition');
      expect(crds.map((crd) => crd.metadata.name).sort()).to.deep.equal([
        'apikeys.audittrail.dev',
        'auditlogstreams.audittrail.dev',
        'legalholds.audittrail.dev',
        'retentionpolicies.audittrail.dev',
        'webhookendpoints.audittrail.dev',
      ]);
      // The Application has the resources finalizer: deleting it deletes what it deployed, except what says otherwise.
      expect(document.metadata.finalizers).to.include('resources-finalizer.argocd.argoproj.io');
      for (const crd of crds)
        expect(crd.metadata.annotations).to.include({ 'argocd.argoproj.io/sync-options': 'Delete=false,Prune=false' });
      expect(byKind(manifests, 'Secret')).to.deep.equal([]);
      expect(byKind(manifests, 'ServiceMonitor')).to.have.length(1);
      // The public API and the customer portal's page, as the chart's own default does.
      const [ingress] = byKind(manifests, 'Ingress');
      const paths = ingress!.spec.rules.flatMap((rule: any) => rule.http.paths.map((path: { path: string }) => path.path));
      expect(paths).to.have.members(['/api/v2/public', '/portal']);
    });

    it("routes the customer portal in docs/operations.md's install command, as the chart's default Ingress does", () => {
      const operations = readFileSync('docs/operations.md', 'utf8');
      const paths = [...operations.matchAll(/'ingress\.hosts\[0\]\.paths\[\d\]=([^']+)'/g)].map((match) => match[1]);
      expect(paths).to.have.members(['/api/v2/public', '/portal']);
      const chartDefault = (load(readFileSync(`${CHART}/values.yaml`, 'utf8')) as { ingress: { hosts: Array<{ paths: string[] }> } })
        .ingress;
      expect(chartDefault.hosts[0]!.paths).to.have.members(paths as string[]);
    });

    it('renders the values of the Flux HelmRelease of docs/examples, with its CRDs applied on every upgrade', async () => {
      const { document, values } = exampleValues('docs/examples/flux-helmrelease.yaml', 'HelmRelease', (release) => release.spec.values);
      expect(document.apiVersion).to.equal('helm.toolkit.fluxcd.io/v2');
      expect(document.spec.chart.spec.chart).to.equal(`./${CHART}`);
      expect(document.spec.upgrade.crds).to.equal('CreateReplace');
      // Helm waits for the migrate hook Job (up to its activeDeadlineSeconds), then for the rollout.
      const chartValues = load(readFileSync(`${CHART}/values.yaml`, 'utf8')) as { migrations: { activeDeadlineSeconds: number } };
      expect(durationSeconds(document.spec.timeout)).to.be.at.least(chartValues.migrations.activeDeadlineSeconds + 300);
      const args = ['template', document.spec.releaseName, CHART, '--namespace', document.metadata.namespace, '-f', values];
      const first = await helm(args);
      expect(first.code, first.stderr).to.equal(0);
      expect((await helm(args)).stdout).to.equal(first.stdout);
    });
  });

  it('renders as a subchart of an umbrella chart, its global registry and pull secrets on every image it runs', async () => {
    const umbrella = temporaryDirectory('umbrella');
    writeFileSync(
      join(umbrella, 'Chart.yaml'),
      dump({
        apiVersion: 'v2',
        name: 'platform',
        version: '1.0.0',
        dependencies: [{ name: 'audit-trail', version: chartVersion(), repository: `file://${resolve(CHART)}` }],
      }),
    );
    writeFileSync(
      join(umbrella, 'values.yaml'),
      dump({
        global: { imageRegistry: 'registry.example.com', imagePullSecrets: ['mirror-credentials'], environment: 'staging' },
        'audit-trail': { secrets: { existingSecret: 'audit-trail-env' }, config: { keyEnvironment: 'test' } },
      }),
    );
    const build = await helm(['dependency', 'build', umbrella]);
    expect(build.code, build.stderr).to.equal(0);
    expect(readdirSync(join(umbrella, 'charts'))).to.deep.equal([`audit-trail-${chartVersion()}.tgz`]);
    const result = await helm(['template', 'platform', umbrella, '--namespace', 'platform']);
    expect(result.code, result.stderr).to.equal(0);
    const manifests = parseManifests(result.stdout);
    const api = named(manifests, 'Deployment', 'platform-audit-trail-api');
    expect(
      api.spec.template.spec.containers[0].env.find((variable: { name: string }) => variable.name === 'KEY_ENVIRONMENT').value,
    ).to.equal('test');
    // Five roles, the migrate Job and the helm test pod: a mirror-only cluster pulls all seven from the mirror.
    const pods = podSpecs(manifests);
    expect(pods.map(({ owner }) => owner.split('/')[0]).sort()).to.deep.equal([...Array(6).fill('Deployment'), 'Job', 'Pod']);
    for (const { owner, spec } of pods) {
      expect(spec.containers[0].image, owner).to.equal(`registry.example.com/audit-trail/audit-trail:${APP_VERSION}`);
      expect(spec.imagePullSecrets, owner).to.deep.equal([{ name: 'mirror-credentials' }]);
    }
    // And copied into charts/ rather than fetched.
    const copied = temporaryDirectory('umbrella-copy');
    cpSync(umbrella, copied, { recursive: true });
    rmSync(join(copied, 'charts'), { recursive: true });
    rmSync(join(copied, 'Chart.lock'), { force: true });
    cpSync(CHART, join(copied, 'charts', 'audit-trail'), { recursive: true });
    writeFileSync(join(copied, 'Chart.yaml'), dump({ apiVersion: 'v2', name: 'platform', version: '1.0.0' }));
    const copiedResult = await helm(['template', 'platform', copied, '--namespace', 'platform']);
    expect(copiedResult.code, copiedResult.stderr).to.equal(0);
  });

  describe('CRD upgrades', () => {
    const files = readdirSync('crds')
      .filter((name) => name.endsWith('.yaml'))
      .sort();

    it('renders the crds/ files as templates with crds.enabled, kept on uninstall with crds.keep', async () => {
      const rendered = (manifests: Manifest[]) => byKind(manifests, 'CustomResourceDefinition');
      const kept = rendered(
        parseManifests(await template(['--set', 'secrets.existingSecret=x', '--set', 'crds.enabled=true'], { includeCrds: false })),
      );
      expect(kept.map((crd) => `${crd.metadata.name}.yaml`).sort()).to.deep.equal(files);
      for (const crd of kept) {
        const file = load(readFileSync(`crds/${crd.metadata.name}.yaml`, 'utf8')) as Manifest;
        expect(crd.spec, crd.metadata.name).to.deep.equal(file.spec);
        expect(crd.metadata.annotations).to.deep.equal(file.metadata.annotations);
        expect(crd.metadata.annotations).to.include({
          'helm.sh/resource-policy': 'keep',
          'argocd.argoproj.io/sync-options': 'Delete=false,Prune=false',
        });
        expect(crd.metadata.labels).to.include({ 'app.kubernetes.io/instance': 'rel', 'app.kubernetes.io/managed-by': 'Helm' });
      }
      const unkept = rendered(
        parseManifests(
          await template(['--set', 'secrets.existingSecret=x', '--set', 'crds.enabled=true', '--set', 'crds.keep=false'], {
            includeCrds: false,
          }),
        ),
      );
      // Only the schema version stays: nothing asks Helm, Argo CD or Flux to keep them.
      expect(unkept.map((crd) => Object.keys(crd.metadata.annotations ?? {}))).to.deep.equal(
        files.map(() => ['audittrail.dev/schema-version']),
      );
      // Off by default: the CRDs then come only from crds/, which Helm installs once.
      expect(rendered(parseManifests(await template(['--set', 'secrets.existingSecret=x'], { includeCrds: false })))).to.deep.equal([]);
    });

    it('make crds writes the same CRDs to crds/ and to the chart, from which the templated copy is read', async () => {
      const workspace = temporaryDirectory('crds');
      await run(process.execPath, [resolve('scripts/generate-crds.ts')], { cwd: workspace });
      expect(readdirSync(join(workspace, 'crds')).sort()).to.deep.equal(files);
      for (const name of files) {
        const written = readFileSync(join(workspace, 'crds', name), 'utf8');
        expect(written, `crds/${name}`).to.equal(readFileSync(`crds/${name}`, 'utf8'));
        expect(readFileSync(join(workspace, CHART, 'crds', name), 'utf8'), `${CHART}/crds/${name}`).to.equal(written);
      }
      expect(readFileSync('Makefile', 'utf8')).to.match(/^crds: install\n\tnode scripts\/generate-crds\.ts$/m);
      expect(readFileSync(`${CHART}/templates/crds.yaml`, 'utf8')).to.include('.Files.Glob "crds/*.yaml"');
    });
  });
});
