import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import { kubernetesBinaries } from '../support/k8s-binaries.ts';

const run = promisify(execFile);
const CHART = 'charts/audit-trail';
const ALL_OPTIONS = 'test/chart/all-options.yaml';

type Manifest = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; annotations?: Record<string, string> }; [key: string]: any };

async function helm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(kubernetesBinaries().helm, args, { maxBuffer: 32 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

async function render(...extra: string[]): Promise<Manifest[]> {
  const result = await helm(['template', 'rel', CHART, '--namespace', 'audit', ...extra]);
  expect(result.code, result.stderr).to.equal(0);
  return loadAll(result.stdout).filter((doc): doc is Manifest => doc !== null && typeof doc === 'object');
}

/** The Kubernetes API schema of a manifest's kind, from kubernetes-models (offline, generated from the API's OpenAPI). */
async function validateAgainstKubernetesSchema(manifest: Manifest): Promise<void> {
  const [group, version] = manifest.apiVersion.includes('/') ? manifest.apiVersion.split('/') : ['', manifest.apiVersion];
  const modulePath =
    group === 'monitoring.coreos.com'
      ? `@kubernetes-models/prometheus-operator/${group}/${version}/${manifest.kind}`
      : `kubernetes-models/${group ? `${group}/` : ''}${version}/${manifest.kind}`;
  const module = (await import(modulePath)) as Record<string, new (data: unknown) => { validate(): void }>;
  const Model = module[manifest.kind];
  expect(Model, `no schema for ${manifest.apiVersion} ${manifest.kind}`).to.be.a('function');
  new Model!(manifest).validate();
}

const byKind = (manifests: Manifest[], kind: string) => manifests.filter((manifest) => manifest.kind === kind);
const named = (manifests: Manifest[], kind: string, name: string) => {
  const found = manifests.find((manifest) => manifest.kind === kind && manifest.metadata.name === name);
  expect(found, `${kind} ${name}`).not.to.equal(undefined);
  return found!;
};

describe('Helm chart', function () {
  this.timeout(60_000);
  let defaults: Manifest[];
  let everything: Manifest[];
  let allNamespaces: Manifest[];

  before(async () => {
    defaults = await render();
    everything = await render('-f', ALL_OPTIONS);
    allNamespaces = await render();
  });

  it('passes helm lint with default values and with every option enabled', async () => {
    for (const args of [[], ['-f', ALL_OPTIONS]]) {
      const result = await helm(['lint', CHART, '--strict', ...args]);
      expect(result.code, result.stdout + result.stderr).to.equal(0);
    }
  });

  it('renders only manifests valid against the Kubernetes API schemas', async () => {
    for (const manifest of [...defaults, ...everything, ...allNamespaces]) {
      try {
        await validateAgainstKubernetesSchema(manifest);
      } catch (error) {
        throw new Error(`${manifest.kind} ${manifest.metadata.name}: ${(error as Error).message}`);
      }
    }
  });

  it('renders each enabled role as a Deployment running the right CLI roles, with a PDB', () => {
    const roles = (manifests: Manifest[]) =>
      Object.fromEntries(byKind(manifests, 'Deployment').map((deployment) => [deployment.metadata.name, deployment.spec.template.spec.containers[0].args]));
    expect(roles(defaults)).to.deep.equal({
      'rel-audit-trail-api': ['serve', '--roles', 'api'],
      'rel-audit-trail-ingest': ['serve', '--roles', 'ingest'],
      'rel-audit-trail-worker': ['serve', '--roles', 'relay,worker'],
      'rel-audit-trail-controller': ['serve', '--roles', 'controller'],
    });
    expect(byKind(everything, 'PodDisruptionBudget')).to.have.length(4);
    expect(byKind(everything, 'HorizontalPodAutoscaler').map((hpa) => hpa.metadata.name).sort()).to.deep.equal([
      'rel-audit-trail-api', 'rel-audit-trail-ingest', 'rel-audit-trail-worker',
    ]);
    // An autoscaled Deployment leaves replicas to the HPA.
    expect(named(everything, 'Deployment', 'rel-audit-trail-api').spec.replicas).to.equal(undefined);
  });

  it('runs every pod restricted: non-root, read-only root filesystem, no privilege escalation, no capabilities, RuntimeDefault seccomp', () => {
    const pods = [...everything, ...defaults].flatMap((manifest) => {
      if (manifest.kind === 'Deployment' || manifest.kind === 'Job') return [manifest.spec.template.spec];
      if (manifest.kind === 'Pod') return [manifest.spec];
      return [];
    });
    expect(pods.length).to.be.greaterThan(8);
    for (const pod of pods) {
      expect(pod.securityContext).to.include({ runAsNonRoot: true });
      expect(pod.securityContext.seccompProfile).to.deep.equal({ type: 'RuntimeDefault' });
      for (const container of pod.containers) {
        expect(container.securityContext).to.deep.include({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true });
        expect(container.securityContext.capabilities).to.deep.equal({ drop: ['ALL'] });
        expect(container.securityContext.seccompProfile).to.deep.equal({ type: 'RuntimeDefault' });
      }
    }
  });

  it('probes /healthz for liveness and /readyz for readiness on the internal port, and exposes the public port only on api', () => {
    for (const deployment of byKind(everything, 'Deployment')) {
      const [container] = deployment.spec.template.spec.containers;
      expect(container.livenessProbe.httpGet).to.deep.equal({ path: '/healthz', port: 'internal' });
      expect(container.readinessProbe.httpGet).to.deep.equal({ path: '/readyz', port: 'internal' });
      const ports = container.ports.map((port: { name: string }) => port.name);
      expect(ports).to.deep.equal(deployment.metadata.name.endsWith('-api') ? ['public', 'internal'] : ['internal']);
    }
  });

  it('mounts a Kubernetes API token only into the controller', () => {
    for (const deployment of byKind(everything, 'Deployment')) {
      const pod = deployment.spec.template.spec;
      if (deployment.metadata.name.endsWith('-controller')) {
        expect(pod.serviceAccountName).to.equal('rel-audit-trail');
        expect(pod.automountServiceAccountToken).to.equal(true);
        const env = Object.fromEntries(pod.containers[0].env.map((variable: { name: string }) => [variable.name, variable]));
        expect(env.CONTROLLER_NAMESPACES.value).to.equal('team-a,team-b');
        expect(env.POD_NAME.valueFrom.fieldRef.fieldPath).to.equal('metadata.name');
      } else {
        expect(pod.automountServiceAccountToken).to.equal(false);
      }
    }
  });

  it("sets the controller's class from controller.class and names its Lease after the release, so releases never share one", async () => {
    const controllerEnv = (manifests: Manifest[], name: string) =>
      Object.fromEntries(named(manifests, 'Deployment', name).spec.template.spec.containers[0].env.map((variable: { name: string; value?: string }) => [variable.name, variable.value]));
    const staging = (await helm(['template', 'audit-staging', CHART, '--namespace', 'audit', '--set', 'controller.class=staging'])).stdout;
    const env = controllerEnv(loadAll(staging) as Manifest[], 'audit-staging-audit-trail-controller');
    expect(env).to.include({ CONTROLLER_CLASS: 'staging', CONTROLLER_LEASE_NAME: 'audit-staging-audit-trail-controller' });
    expect(controllerEnv(defaults, 'rel-audit-trail-controller')).to.include({ CONTROLLER_CLASS: 'default', CONTROLLER_LEASE_NAME: 'rel-audit-trail-controller' });
  });

  it('migrates in a pre-install/pre-upgrade hook Job that runs after the generated Secret exists', () => {
    const job = named(defaults, 'Job', 'rel-audit-trail-migrate');
    expect(job.metadata.annotations).to.include({ 'helm.sh/hook': 'pre-install,pre-upgrade' });
    expect(job.spec.template.spec.containers[0].args).to.deep.equal(['migrate']);
    const secret = named(defaults, 'Secret', 'rel-audit-trail-env');
    expect(secret.metadata.annotations).to.include({ 'helm.sh/hook': 'pre-install,pre-upgrade', 'helm.sh/resource-policy': 'keep' });
    expect(Number(secret.metadata.annotations!['helm.sh/hook-weight'])).to.be.below(Number(job.metadata.annotations!['helm.sh/hook-weight']));
    // Generated once: a strong pepper and a 256-bit encryption key, never a fixed placeholder.
    expect(secret.stringData.KEY_PEPPER).to.have.length.of.at.least(32);
    expect(secret.stringData.SECRET_ENCRYPTION_KEY).to.match(/^[0-9a-f]{64}$/);
  });

  it('uses an existing Secret for every connection string and secret when one is named, and creates none', () => {
    expect(byKind(everything, 'Secret')).to.deep.equal([]);
    const env = named(everything, 'Deployment', 'rel-audit-trail-api').spec.template.spec.containers[0].env;
    for (const variable of ['DATABASE_URL', 'REDIS_URL', 'NATS_URL', 'KEY_PEPPER', 'SECRET_ENCRYPTION_KEY', 'INGEST_TOKENS']) {
      const entry = env.find((item: { name: string }) => item.name === variable);
      expect(entry.valueFrom.secretKeyRef, variable).to.deep.equal({ name: 'audit-trail-env', key: variable });
    }
    expect(env.find((item: { name: string }) => item.name === 'KEY_ENVIRONMENT').value).to.equal('test');
  });

  it('grants the controller exactly the verbs it uses, cluster-wide or per listed namespace, and leases only at home', async () => {
    const expected = [
      { apiGroups: ['audittrail.dev'], resources: ['apikeys', 'webhookendpoints'], verbs: ['get', 'list', 'watch', 'patch'] },
      { apiGroups: ['audittrail.dev'], resources: ['apikeys/status', 'webhookendpoints/status'], verbs: ['patch'] },
      { apiGroups: ['audittrail.dev'], resources: ['apikeys/finalizers', 'webhookendpoints/finalizers'], verbs: ['update'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch', 'create', 'update'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ];

    const clusterRole = named(allNamespaces, 'ClusterRole', 'rel-audit-trail-controller');
    expect(clusterRole.rules).to.deep.equal(expected);
    expect(byKind(everything, 'ClusterRole')).to.deep.equal([]);
    const roles = byKind(everything, 'Role').filter((role) => role.metadata.name === 'rel-audit-trail-controller');
    expect(roles.map((role) => role.metadata.namespace).sort()).to.deep.equal(['team-a', 'team-b']);
    for (const role of roles) expect(role.rules).to.deep.equal(expected);
    const leases = named(everything, 'Role', 'rel-audit-trail-leader-election');
    expect(leases.metadata.namespace).to.equal(undefined); // the release namespace
    expect(leases.rules).to.deep.equal([{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] }]);
    for (const rule of [...clusterRole.rules, ...leases.rules]) expect(rule.verbs).not.to.include('*');
    expect(byKind(await render('--set', 'controller.enabled=false'), 'ClusterRole')).to.deep.equal([]);
  });

  it('renders the optional Ingress, NetworkPolicy, ServiceMonitor and the helm test hook', () => {
    const ingress = named(everything, 'Ingress', 'rel-audit-trail');
    expect(ingress.spec.rules[0].http.paths[0].backend.service).to.deep.equal({ name: 'rel-audit-trail-api', port: { name: 'public' } });
    expect(named(everything, 'NetworkPolicy', 'rel-audit-trail').spec.policyTypes).to.deep.equal(['Ingress']);
    expect(named(everything, 'ServiceMonitor', 'rel-audit-trail').spec.endpoints[0]).to.include({ port: 'internal', path: '/metrics' });
    const test = named(defaults, 'Pod', 'rel-audit-trail-test-readyz');
    expect(test.metadata.annotations).to.include({ 'helm.sh/hook': 'test' });
    expect(test.spec.containers[0].args.join(' ')).to.include('/readyz');
    for (const kind of ['Ingress', 'NetworkPolicy', 'ServiceMonitor', 'HorizontalPodAutoscaler']) expect(byKind(defaults, kind), kind).to.deep.equal([]);
  });

  describe('values.schema.json refuses bad values with a message naming them', () => {
    const cases: Array<[string, string[], RegExp]> = [
      ['an unknown key environment', ['--set', 'config.keyEnvironment=prod'], /\/config\/keyEnvironment/],
      ['a negative replica count', ['--set', 'api.replicas=-1'], /\/api\/replicas/],
      ['an encryption key that is not 64 hex', ['--set', 'secrets.secretEncryptionKey=abc'], /\/secrets\/secretEncryptionKey/],
      ['a short pepper', ['--set', 'secrets.keyPepper=short'], /\/secrets\/keyPepper/],
      ['a database URL of another scheme', ['--set', 'secrets.databaseUrl=mysql://db/x'], /\/secrets\/databaseUrl/],
      ['privilege escalation', ['--set', 'securityContext.allowPrivilegeEscalation=true'], /allowPrivilegeEscalation/],
      ['a misspelt key', ['--set', 'api.replica=3'], /replica/],
      ['a malformed delivery schedule', ['--set', 'config.deliverySchedule=soon'], /deliverySchedule/],
      ['an invalid namespace to watch', ['--set', 'controller.watchNamespaces[0]=Team_A'], /watchNamespaces/],
      ['a controller class that is not a DNS label', ['--set', 'controller.class=Prod_EU'], /\/controller\/class/],
    ];
    for (const [what, args, message] of cases) {
      it(`refuses ${what}`, async () => {
        const result = await helm(['template', 'rel', CHART, ...args]);
        expect(result.code).not.to.equal(0);
        expect(result.stderr).to.match(message);
      });
    }
  });

  it("ships crds/ identical to the top-level crds/", () => {
    const list = (directory: string) => (existsSync(directory) ? readdirSync(directory).filter((name) => name.endsWith('.yaml')).sort() : []);
    const top = list('crds');
    expect(list(`${CHART}/crds`)).to.deep.equal(top);
    for (const name of top) expect(readFileSync(`${CHART}/crds/${name}`, 'utf8'), name).to.equal(readFileSync(`crds/${name}`, 'utf8'));
  });
});
