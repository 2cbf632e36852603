import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { load } from 'js-yaml';
import { CHART, byKind, environment, helm, named, parseManifests, podSpecs, type Manifest } from '../support/helm.ts';

const ALL_OPTIONS = 'test/chart/all-options.yaml';
/** A cluster with the Prometheus Operator's CRDs, as Argo CD tells helm template (the ServiceMonitor needs them). */
const PROMETHEUS_OPERATOR = ['--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor'];
const TEST_SEAL_KEY = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
/** Without a cluster the chart generates no secrets: these stand for a Secret the operator manages. */
const EXISTING_SECRET = ['--set', 'secrets.existingSecret=audit-trail-env'];
/** The project's version: the chart's appVersion, and so the default image tag. */
const APP_VERSION = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
const GIVEN_SECRETS = [
  '--set',
  `secrets.keyPepper=${'p'.repeat(40)}`,
  '--set',
  `secrets.secretEncryptionKey=${'a1'.repeat(32)}`,
  '--set',
  `secrets.ingestTokens=${'t'.repeat(30)}`,
  '--set',
  `secrets.sealSigningKey=${TEST_SEAL_KEY}`,
];

async function render(...extra: string[]): Promise<Manifest[]> {
  const result = await helm(['template', 'rel', CHART, '--namespace', 'audit', ...extra]);
  expect(result.code, result.stderr).to.equal(0);
  return parseManifests(result.stdout);
}

async function refusal(...extra: string[]): Promise<string> {
  const result = await helm(['template', 'rel', CHART, '--namespace', 'audit', ...extra]);
  expect(result.code, `rendered although it should refuse: ${extra.join(' ')}`).not.to.equal(0);
  return result.stderr;
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

describe('Helm chart', function () {
  this.timeout(60_000);
  let defaults: Manifest[];
  let everything: Manifest[];
  let allNamespaces: Manifest[];

  before(async () => {
    defaults = await render(...GIVEN_SECRETS);
    everything = await render('-f', ALL_OPTIONS, ...PROMETHEUS_OPERATOR);
    allNamespaces = await render(...EXISTING_SECRET, '--set', 'crds.enabled=true');
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
      Object.fromEntries(
        byKind(manifests, 'Deployment').map((deployment) => [deployment.metadata.name, deployment.spec.template.spec.containers[0].args]),
      );
    expect(roles(defaults)).to.deep.equal({
      'rel-audit-trail-api': ['serve', '--roles', 'api'],
      'rel-audit-trail-ingest': ['serve', '--roles', 'ingest'],
      'rel-audit-trail-worker': ['serve', '--roles', 'relay,worker'],
      'rel-audit-trail-controller': ['serve', '--roles', 'controller'],
      'rel-audit-trail-sealer': ['serve', '--roles', 'sealer'],
      'rel-audit-trail-streams': ['serve', '--roles', 'streams'],
    });
    expect(byKind(everything, 'PodDisruptionBudget')).to.have.length(6);
    expect(
      byKind(everything, 'HorizontalPodAutoscaler')
        .map((hpa) => hpa.metadata.name)
        .sort(),
    ).to.deep.equal(['rel-audit-trail-api', 'rel-audit-trail-ingest', 'rel-audit-trail-worker']);
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
        expect(container.securityContext).to.deep.include({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
        });
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

  it("runs every pod as the chart's ServiceAccount and mounts a Kubernetes API token only into the controller", () => {
    for (const deployment of byKind(everything, 'Deployment')) {
      const pod = deployment.spec.template.spec;
      expect(pod.serviceAccountName, deployment.metadata.name).to.equal('rel-audit-trail');
      if (deployment.metadata.name.endsWith('-controller')) {
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
      Object.fromEntries(
        named(manifests, 'Deployment', name).spec.template.spec.containers[0].env.map((variable: { name: string; value?: string }) => [
          variable.name,
          variable.value,
        ]),
      );
    const staging = (
      await helm(['template', 'audit-staging', CHART, '--namespace', 'audit', ...GIVEN_SECRETS, '--set', 'controller.class=staging'])
    ).stdout;
    const env = controllerEnv(parseManifests(staging), 'audit-staging-audit-trail-controller');
    expect(env).to.include({ CONTROLLER_CLASS: 'staging', CONTROLLER_LEASE_NAME: 'audit-staging-audit-trail-controller' });
    expect(controllerEnv(defaults, 'rel-audit-trail-controller')).to.include({
      CONTROLLER_CLASS: 'default',
      CONTROLLER_LEASE_NAME: 'rel-audit-trail-controller',
    });
  });

  it('keeps its Secret an ordinary resource, kept on uninstall; the migrate hook Job gets DATABASE_URL and a ServiceAccount from hooks of its own', () => {
    const secret = named(defaults, 'Secret', 'rel-audit-trail-env');
    // A hook would be deleted and re-created by Argo CD on every sync.
    expect(secret.metadata.annotations).to.deep.equal({ 'helm.sh/resource-policy': 'keep' });
    expect(secret.stringData).to.include({
      KEY_PEPPER: 'p'.repeat(40),
      SECRET_ENCRYPTION_KEY: 'a1'.repeat(32),
      DATABASE_URL: 'postgres://audit_trail@postgresql:5432/audit_trail',
    });

    const job = named(defaults, 'Job', 'rel-audit-trail-migrate');
    expect(job.metadata.annotations).to.include({ 'helm.sh/hook': 'pre-install,pre-upgrade' });
    expect(job.spec.template.spec.containers[0].args).to.deep.equal(['migrate']);
    // Hooks run before the release's resources exist: the Job's Secret and ServiceAccount are hooks too, created first.
    const hookSecret = named(defaults, 'Secret', 'rel-audit-trail-migrate');
    const hookAccount = named(defaults, 'ServiceAccount', 'rel-audit-trail-migrate');
    for (const hook of [hookSecret, hookAccount]) {
      expect(hook.metadata.annotations).to.include({
        'helm.sh/hook': 'pre-install,pre-upgrade',
        'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded',
      });
      expect(Number(hook.metadata.annotations!['helm.sh/hook-weight'])).to.be.below(
        Number(job.metadata.annotations!['helm.sh/hook-weight']),
      );
    }
    expect(hookSecret.stringData).to.deep.equal({ DATABASE_URL: 'postgres://audit_trail@postgresql:5432/audit_trail' });
    expect(environment(job.spec.template.spec.containers[0]).DATABASE_URL).to.deep.equal({
      secretKeyRef: { name: 'rel-audit-trail-migrate', key: 'DATABASE_URL' },
    });
    expect(job.spec.template.spec.serviceAccountName).to.equal('rel-audit-trail-migrate');
  });

  it("schedules the migrate Job like the chart's pods: ServiceAccount annotations, nodeSelector, tolerations, affinity, resources, extra volumes", () => {
    const job = named(everything, 'Job', 'rel-audit-trail-migrate');
    const pod = job.spec.template.spec;
    const values = readFileSync(ALL_OPTIONS, 'utf8');
    expect(values).to.include('pool: system');
    expect(pod.nodeSelector).to.deep.equal({ pool: 'system' });
    expect(pod.tolerations).to.deep.equal([{ key: 'dedicated', operator: 'Equal', value: 'system', effect: 'NoSchedule' }]);
    expect(pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key).to.equal(
      'kubernetes.io/arch',
    );
    expect(pod.containers[0].resources).to.deep.equal({ requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '384Mi' } });
    expect(pod.automountServiceAccountToken).to.equal(false);
    // The migrate ServiceAccount carries the chart's ServiceAccount annotations (cloud IAM to the database).
    expect(named(everything, 'ServiceAccount', pod.serviceAccountName).metadata.annotations).to.include({
      'eks.amazonaws.com/role-arn': 'arn:aws:iam::123456789012:role/audit',
    });
    expect(pod.volumes.map((volume: { name: string }) => volume.name)).to.include('corporate-ca');
    expect(pod.containers[0].volumeMounts.map((mount: { name: string }) => mount.name)).to.include('corporate-ca');
    // With an existing Secret there is no hook Secret: the Job reads the operator's.
    expect(environment(pod.containers[0]).DATABASE_URL).to.deep.equal({ secretKeyRef: { name: 'audit-trail-env', key: 'DATABASE_URL' } });
  });

  it('gives SEAL_SIGNING_KEY from the Secret to the sealer pods only, and SEAL_INTERVAL and CHECKPOINT_ORIGIN to every pod', () => {
    const secret = named(defaults, 'Secret', 'rel-audit-trail-env');
    expect(secret.stringData.SEAL_SIGNING_KEY).to.equal(TEST_SEAL_KEY);
    for (const deployment of byKind(everything, 'Deployment')) {
      const env = environment(deployment.spec.template.spec.containers[0]);
      expect(env.SEAL_INTERVAL, deployment.metadata.name).to.equal('5s');
      // The checkpoint origin's first part, read by the sealer; the same everywhere, like SEAL_INTERVAL.
      expect(env.CHECKPOINT_ORIGIN, deployment.metadata.name).to.equal('audit.example.com/trail');
      if (deployment.metadata.name === 'rel-audit-trail-sealer') {
        expect(env.SEAL_SIGNING_KEY).to.deep.equal({ secretKeyRef: { name: 'audit-trail-env', key: 'SEAL_SIGNING_KEY' } });
      } else {
        expect(env, deployment.metadata.name).not.to.have.property('SEAL_SIGNING_KEY');
      }
    }
  });

  it('gives the api pods OPERATOR_TOKENS from the Secret when it holds them (optional), and no other pod', () => {
    for (const deployment of byKind(everything, 'Deployment')) {
      const env = environment(deployment.spec.template.spec.containers[0]);
      if (deployment.metadata.name === 'rel-audit-trail-api') {
        expect(env.OPERATOR_TOKENS).to.deep.equal({ secretKeyRef: { name: 'audit-trail-env', key: 'OPERATOR_TOKENS', optional: true } });
      } else {
        expect(env, deployment.metadata.name).not.to.have.property('OPERATOR_TOKENS');
      }
    }
  });

  it('runs the streams role as a Deployment of its own: its values, probes, PDB, the secrets key and no API token', async () => {
    const deployment = named(everything, 'Deployment', 'rel-audit-trail-streams');
    expect(deployment.spec.replicas).to.equal(3);
    const pod = deployment.spec.template.spec;
    const [container] = pod.containers;
    expect(container.args).to.deep.equal(['serve', '--roles', 'streams']);
    expect(container.resources).to.deep.equal({ requests: { cpu: '200m', memory: '256Mi' }, limits: { memory: '768Mi' } });
    expect(container.readinessProbe.httpGet).to.deep.equal({ path: '/readyz', port: 'internal' });
    expect(container.livenessProbe.httpGet).to.deep.equal({ path: '/healthz', port: 'internal' });
    expect(container.ports.map((port: { name: string }) => port.name)).to.deep.equal(['internal']);
    expect(pod.nodeSelector).to.deep.equal({ pool: 'system' });
    // Destinations' secrets are sealed with SECRET_ENCRYPTION_KEY; the role signs nothing and talks to no Kubernetes API.
    const env = environment(container);
    expect(env.SECRET_ENCRYPTION_KEY).to.have.property('secretKeyRef');
    expect(env).not.to.have.property('SEAL_SIGNING_KEY');
    expect(pod.automountServiceAccountToken).to.equal(false);
    expect(named(everything, 'PodDisruptionBudget', 'rel-audit-trail-streams').spec.minAvailable).to.equal(2);
    expect(named(defaults, 'Deployment', 'rel-audit-trail-streams').spec.replicas).to.equal(2);
    const without = await render(...GIVEN_SECRETS, '--set', 'streams.enabled=false');
    expect(byKind(without, 'Deployment').map((item) => item.metadata.name)).not.to.include('rel-audit-trail-streams');
  });

  it('runs the retention role only when asked to: a Deployment with its interval, batch size, duty cycle and the default period', async () => {
    expect(byKind(defaults, 'Deployment').map((item) => item.metadata.name)).not.to.include('rel-audit-trail-retention');
    const manifests = await render(
      ...GIVEN_SECRETS,
      '--set',
      'retention.enabled=true',
      '--set',
      'retention.interval=30m',
      '--set',
      'retention.batchSize=2000',
      '--set',
      'retention.dutyCycle=0.5',
      '--set',
      'config.retentionDefault=6y',
      '--set',
      'retention.archive.endpoint=https://minio.storage:9000',
      '--set',
      'retention.archive.forcePathStyle=true',
    );
    const deployment = named(manifests, 'Deployment', 'rel-audit-trail-retention');
    expect(deployment.spec.replicas).to.equal(1);
    const pod = deployment.spec.template.spec;
    const [container] = pod.containers;
    expect(container.args).to.deep.equal(['serve', '--roles', 'retention']);
    expect(container.readinessProbe.httpGet).to.deep.equal({ path: '/readyz', port: 'internal' });
    const env = environment(container);
    expect(env).to.include({
      RETENTION_INTERVAL: '30m',
      RETENTION_BATCH_SIZE: '2000',
      RETENTION_DUTY_CYCLE: '0.5',
      RETENTION_DEFAULT: '6y',
    });
    // The archive store (docs/retention.md "Archive before expiry"): the release's, keys only when the Secret holds them.
    expect(env).to.include({
      ARCHIVE_S3_REGION: 'us-east-1',
      ARCHIVE_S3_ENDPOINT: 'https://minio.storage:9000',
      ARCHIVE_S3_FORCE_PATH_STYLE: 'true',
    });
    for (const key of ['ARCHIVE_S3_ACCESS_KEY_ID', 'ARCHIVE_S3_SECRET_ACCESS_KEY'])
      expect(env[key]).to.deep.equal({ secretKeyRef: { name: 'rel-audit-trail-env', key, optional: true } });
    for (const other of byKind(manifests, 'Deployment').filter((item) => item.metadata.name !== 'rel-audit-trail-retention'))
      expect(environment(other.spec.template.spec.containers[0])).not.to.have.property('ARCHIVE_S3_ACCESS_KEY_ID');
    expect(env).not.to.have.property('SEAL_SIGNING_KEY');
    expect(pod.automountServiceAccountToken).to.equal(false);
    expect(byKind(manifests, 'Service').map((service) => service.metadata.name)).to.include('rel-audit-trail-retention-internal');
    expect(await refusal(...GIVEN_SECRETS, '--set', 'retention.enabled=true', '--set', 'retention.interval=hourly')).to.contain('interval');
    expect(await refusal(...GIVEN_SECRETS, '--set', 'config.retentionDefault=6m')).to.contain('retentionDefault');
  });

  it("publishes listed tenants' transparency logs to the archive store on a schedule only when asked to, with nothing but the database and the store", async () => {
    expect(byKind(defaults, 'CronJob')).to.deep.equal([]);
    const cronJobs = byKind(everything, 'CronJob');
    expect(cronJobs.map((job) => job.metadata.annotations!['audittrail.dev/tenant'])).to.deep.equal(['acme', 'Big_Co']);
    for (const job of cronJobs) {
      const tenant = job.metadata.annotations!['audittrail.dev/tenant'];
      expect(job.metadata.name).to.match(/^rel-audit-trail-publish-[0-9a-f]{10}$/);
      // Two runs of one tenant's copy never race; a stopped run is carried on by the next.
      expect(job.spec).to.include({ schedule: '*/5 * * * *', concurrencyPolicy: 'Forbid' });
      expect(job.spec.jobTemplate.spec.activeDeadlineSeconds).to.equal(600);
      const pod = job.spec.jobTemplate.spec.template.spec;
      expect(pod.nodeSelector).to.deep.equal({ pool: 'system' });
      expect(pod.automountServiceAccountToken).to.equal(false);
      const [container] = pod.containers;
      expect(container.args).to.deep.equal(['integrity', 'publish', '--tenant', tenant, '--bucket', 'audit-transparency']);
      const env = environment(container);
      expect(env).to.include({ ARCHIVE_S3_REGION: 'us-east-1' });
      expect(env).to.have.property('DATABASE_URL');
      // Least privilege: the copy reads the database and writes the bucket; no pepper, key or token reaches it.
      for (const secret of ['KEY_PEPPER', 'SECRET_ENCRYPTION_KEY', 'INGEST_TOKENS', 'SEAL_SIGNING_KEY', 'REDIS_URL', 'NATS_URL'])
        expect(env, secret).not.to.have.property(secret);
    }
    expect(
      await refusal(...GIVEN_SECRETS, '--set', 'integrityPublish.enabled=true', '--set', 'integrityPublish.tenants={acme}'),
    ).to.contain('integrityPublish.bucket');
    expect(
      await refusal(...GIVEN_SECRETS, '--set', 'integrityPublish.enabled=true', '--set', 'integrityPublish.bucket=audit-copies'),
    ).to.contain('integrityPublish.tenants');
    expect(await refusal(...GIVEN_SECRETS, '--set', 'integrityPublish.tenants={no spaces}')).to.contain('integrityPublish/tenants');
  });

  it('needs no signing key when the sealer is disabled, and renders no sealer then', async () => {
    const manifests = await render(...GIVEN_SECRETS.slice(0, -2), '--set', 'sealer.enabled=false');
    expect(byKind(manifests, 'Deployment').map((deployment) => deployment.metadata.name)).not.to.include('rel-audit-trail-sealer');
    expect(await refusal(...GIVEN_SECRETS.slice(0, -2))).to.contain('secrets.sealSigningKey');
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
      {
        apiGroups: ['audittrail.dev'],
        resources: ['retentionpolicies', 'legalholds', 'auditlogstreams'],
        verbs: ['list', 'watch', 'patch'],
      },
      {
        apiGroups: ['audittrail.dev'],
        resources: ['apikeys/status', 'webhookendpoints/status', 'retentionpolicies/status', 'legalholds/status', 'auditlogstreams/status'],
        verbs: ['patch'],
      },
      {
        apiGroups: ['audittrail.dev'],
        resources: [
          'apikeys/finalizers',
          'webhookendpoints/finalizers',
          'retentionpolicies/finalizers',
          'legalholds/finalizers',
          'auditlogstreams/finalizers',
        ],
        verbs: ['update'],
      },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch', 'create', 'update'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ];

    // Outside the release namespace, names carry it: the same release name may be installed in two namespaces.
    const clusterRole = named(allNamespaces, 'ClusterRole', 'audit.rel-audit-trail-controller');
    expect(clusterRole.rules).to.deep.equal(expected);
    // Its CRDs, by name, in either mode: the controller refuses to reconcile a kind whose CRD is older than it.
    const crdReader = [
      {
        apiGroups: ['apiextensions.k8s.io'],
        resources: ['customresourcedefinitions'],
        resourceNames: [
          'apikeys.audittrail.dev',
          'auditlogstreams.audittrail.dev',
          'legalholds.audittrail.dev',
          'retentionpolicies.audittrail.dev',
          'webhookendpoints.audittrail.dev',
        ],
        verbs: ['list', 'watch'],
      },
    ];
    // And the Namespaces, for their tenant bindings: all of them, or each watched one by name.
    const namespaceReader = (names?: string[]) => ({
      apiGroups: [''],
      resources: ['namespaces'],
      ...(names ? { resourceNames: names } : {}),
      verbs: ['list', 'watch'],
    });
    expect(named(allNamespaces, 'ClusterRole', 'audit.rel-audit-trail-controller-crds').rules).to.deep.equal([
      ...crdReader,
      namespaceReader(),
    ]);
    expect(byKind(everything, 'ClusterRole').map((role) => role.rules)).to.deep.equal([
      [...crdReader, namespaceReader(['team-a', 'team-b'])],
    ]);
    expect(named(everything, 'ClusterRoleBinding', 'audit.rel-audit-trail-controller-crds').subjects).to.deep.equal([
      { kind: 'ServiceAccount', name: 'rel-audit-trail', namespace: 'audit' },
    ]);
    const roles = byKind(everything, 'Role').filter((role) => role.metadata.name === 'audit.rel-audit-trail-controller');
    expect(roles.map((role) => role.metadata.namespace).sort()).to.deep.equal(['team-a', 'team-b']);
    for (const role of roles) expect(role.rules).to.deep.equal(expected);
    const leases = named(everything, 'Role', 'rel-audit-trail-leader-election');
    expect(leases.metadata.namespace).to.equal(undefined); // the release namespace
    // A create names no object, so RBAC cannot restrict it by name; every read and write of the Lease names it.
    expect(leases.rules).to.deep.equal([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['rel-audit-trail-controller'],
        verbs: ['get', 'update'],
      },
    ]);
    for (const rule of [...clusterRole.rules, ...leases.rules]) expect(rule.verbs).not.to.include('*');
    expect(byKind(await render(...EXISTING_SECRET, '--set', 'controller.enabled=false'), 'ClusterRole')).to.deep.equal([]);
  });

  it("sets the customer portal's PUBLIC_BASE_URL (given, or the Ingress's first host) and PORTAL_FRAME_ANCESTORS, and routes /portal", async () => {
    const apiEnv = (manifests: Manifest[]) =>
      Object.fromEntries(
        named(manifests, 'Deployment', 'rel-audit-trail-api').spec.template.spec.containers[0].env.map(
          (variable: { name: string; value?: string }) => [variable.name, variable.value],
        ),
      );
    expect(apiEnv(everything)).to.include({ PUBLIC_BASE_URL: 'https://audit.example.com', PORTAL_FRAME_ANCESTORS: '' });
    expect(apiEnv(defaults)).not.to.have.property('PUBLIC_BASE_URL');
    const given = await render(
      ...GIVEN_SECRETS,
      '--set',
      'config.publicBaseUrl=https://trail.example.org/audit',
      '--set',
      'config.portalFrameAncestors={https://console.example.org,https://*.clinics.example}',
      '--set',
      'ingress.enabled=true',
    );
    expect(apiEnv(given)).to.include({
      PUBLIC_BASE_URL: 'https://trail.example.org/audit',
      PORTAL_FRAME_ANCESTORS: 'https://console.example.org,https://*.clinics.example',
    });
    const paths = named(given, 'Ingress', 'rel-audit-trail').spec.rules[0].http.paths.map((path: { path: string }) => path.path);
    expect(paths).to.deep.equal(['/api/v2/public', '/portal']);
    expect(await refusal(...GIVEN_SECRETS, '--set', 'config.portalFrameAncestors={https://console.example.org; script-src *}')).to.match(
      /portalFrameAncestors/,
    );
  });

  it('renders the optional Ingress, NetworkPolicy and ServiceMonitor, the last selecting its Service on labels that never change', () => {
    const ingress = named(everything, 'Ingress', 'rel-audit-trail');
    expect(ingress.spec.rules[0].http.paths[0].backend.service).to.deep.equal({ name: 'rel-audit-trail-api', port: { name: 'public' } });
    expect(named(everything, 'NetworkPolicy', 'rel-audit-trail').spec.policyTypes).to.deep.equal(['Ingress']);
    const monitor = named(everything, 'ServiceMonitor', 'rel-audit-trail');
    expect(monitor.spec.endpoints[0]).to.include({ port: 'internal', path: '/metrics' });
    // Not helm.sh/chart or the version: an upgrade would otherwise leave the selector behind for a moment.
    expect(monitor.spec.selector.matchLabels).to.deep.equal({
      'app.kubernetes.io/name': 'audit-trail',
      'app.kubernetes.io/instance': 'rel',
      'app.kubernetes.io/component': 'metrics',
    });
    const selected = byKind(everything, 'Service').filter((service) =>
      Object.entries(monitor.spec.selector.matchLabels).every(([key, value]) => service.metadata.labels?.[key] === value),
    );
    expect(selected.map((service) => service.metadata.name)).to.deep.equal(['rel-audit-trail-metrics']);
    for (const kind of ['Ingress', 'NetworkPolicy', 'ServiceMonitor', 'HorizontalPodAutoscaler'])
      expect(byKind(defaults, kind), kind).to.deep.equal([]);
  });

  it('limits where each role connects with networkPolicy.egress: DNS and what that role uses, nothing else', async () => {
    const egress = byKind(everything, 'NetworkPolicy').filter((policy) => policy.spec.policyTypes.includes('Egress'));
    const byRole = Object.fromEntries(egress.map((policy) => [policy.spec.podSelector.matchLabels['app.kubernetes.io/component'], policy]));
    expect(Object.keys(byRole).sort()).to.deep.equal(['api', 'controller', 'ingest', 'migrate', 'publish', 'sealer', 'streams', 'worker']);
    const values = load(readFileSync(ALL_OPTIONS, 'utf8')) as any;
    const chartValues = load(readFileSync(`${CHART}/values.yaml`, 'utf8')) as any;
    const rule = (target: string) => {
      const given = { ...chartValues.networkPolicy.egress[target], ...values.networkPolicy.egress[target] };
      return { ...(given.to.length > 0 ? { to: given.to } : {}), ...(given.ports.length > 0 ? { ports: given.ports } : {}) };
    };
    const expected: Record<string, string[]> = {
      api: ['dns', 'postgres', 'redis', 'webhooks'],
      ingest: ['dns', 'postgres', 'nats'],
      // Redis: endpoints' rate limits are shared through it (docs/webhooks.md "Delivery settings").
      worker: ['dns', 'postgres', 'nats', 'redis', 'webhooks'],
      controller: ['dns', 'postgres', 'kubernetesApi'],
      // NATS: the fork guard's ledger of signed heads (docs/integrity.md "The fork guard").
      sealer: ['dns', 'postgres', 'nats'],
      // SIEM destinations are public addresses, like webhook receivers.
      streams: ['dns', 'postgres', 'webhooks'],
      migrate: ['dns', 'postgres'],
      // integrityPublish's CronJobs: the database, then the bucket the static copies go to.
      publish: ['dns', 'postgres', 'archive'],
    };
    for (const [role, targets] of Object.entries(expected)) {
      expect(byRole[role]!.spec.egress, role).to.deep.equal(targets.map(rule));
      // Each selects exactly its role's pods, which carry these labels (a publishing CronJob per tenant).
      const pods = podSpecs(everything).filter(({ owner }) => new RegExp(`-${role}(-[0-9a-f]{10})?$`).test(owner));
      expect(pods, role).to.have.length(role === 'publish' ? 2 : 1);
    }
    // Receivers are anywhere, on any port; private ranges stay out.
    expect(rule('webhooks').to[0].ipBlock.except).to.include('10.0.0.0/8');
    expect(rule('webhooks')).not.to.have.property('ports');
    // Ingress stays as it was; the test pod, without a role, is not restricted.
    expect(named(everything, 'NetworkPolicy', 'rel-audit-trail').spec.policyTypes).to.deep.equal(['Ingress']);
    const off = await render(...EXISTING_SECRET, '--set', 'networkPolicy.enabled=true');
    expect(byKind(off, 'NetworkPolicy').map((policy) => policy.metadata.name)).to.deep.equal(['rel-audit-trail']);
  });

  it('puts global.imageRegistry in place of the registry of image.repository, or before a repository that names none', async () => {
    const image = async (repository: string, ...extra: string[]) =>
      named(
        await render(
          ...EXISTING_SECRET,
          '--set',
          'global.imageRegistry=mirror.internal:5000',
          '--set',
          `image.repository=${repository}`,
          ...extra,
        ),
        'Deployment',
        'rel-audit-trail-api',
      ).spec.template.spec.containers[0].image;
    expect(await image('ghcr.io/audit-trail/audit-trail')).to.equal(`mirror.internal:5000/audit-trail/audit-trail:${APP_VERSION}`);
    expect(await image('localhost:5000/audit-trail')).to.equal(`mirror.internal:5000/audit-trail:${APP_VERSION}`);
    expect(await image('localhost/audit-trail')).to.equal(`mirror.internal:5000/audit-trail:${APP_VERSION}`);
    expect(await image('team/audit-trail')).to.equal(`mirror.internal:5000/team/audit-trail:${APP_VERSION}`);
    expect(await image('audit-trail', '--set', `image.digest=sha256:${'0'.repeat(64)}`)).to.equal(
      `mirror.internal:5000/audit-trail@sha256:${'0'.repeat(64)}`,
    );
  });

  it('leaves the ServiceMonitor out where the cluster serves no such kind, and says so in the notes', async () => {
    // Without the Prometheus Operator's CRDs the install would fail on it, taking the whole release down.
    const manifests = await render('-f', ALL_OPTIONS);
    expect(byKind(manifests, 'ServiceMonitor')).to.deep.equal([]);
    expect(byKind(manifests, 'Deployment')).to.have.length(6);
    const dryRun = await helm(['install', 'rel', CHART, '--namespace', 'audit', '--dry-run=client', '-f', ALL_OPTIONS]);
    expect(dryRun.code, dryRun.stderr).to.equal(0);
    expect(dryRun.stdout).to.include('serviceMonitor.enabled, but this cluster serves no monitoring.coreos.com/v1 ServiceMonitor');
    const off = await helm(['install', 'rel', CHART, '--namespace', 'audit', '--dry-run=client', ...EXISTING_SECRET]);
    expect(off.stdout).not.to.include('serves no monitoring.coreos.com/v1 ServiceMonitor');
  });

  it('checks the readiness of every enabled role in helm test, through ClusterIP Services of the internal port', async () => {
    const urls = (manifests: Manifest[]) => named(manifests, 'Pod', 'rel-audit-trail-test-readyz').spec.containers[0].args.slice(1);
    expect(named(defaults, 'Pod', 'rel-audit-trail-test-readyz').metadata.annotations).to.include({ 'helm.sh/hook': 'test' });
    expect(urls(defaults)).to.deep.equal([
      'http://rel-audit-trail-api-internal:8081/readyz',
      'http://rel-audit-trail-internal:8081/readyz',
      'http://rel-audit-trail-worker-internal:8081/readyz',
      'http://rel-audit-trail-controller-internal:8081/readyz',
      'http://rel-audit-trail-sealer-internal:8081/readyz',
      'http://rel-audit-trail-streams-internal:8081/readyz',
    ]);
    for (const url of urls(defaults)) {
      const service = named(defaults, 'Service', new URL(url).hostname);
      expect(service.spec.type).to.equal('ClusterIP');
      const role = service.spec.selector['app.kubernetes.io/component'];
      expect(named(defaults, 'Deployment', `rel-audit-trail-${role}`).spec.template.metadata.labels).to.deep.include(service.spec.selector);
    }
    const withoutWorkers = await render(
      ...EXISTING_SECRET,
      '--set',
      'worker.enabled=false',
      '--set',
      'controller.enabled=false',
      '--set',
      'sealer.enabled=false',
      '--set',
      'streams.enabled=false',
    );
    expect(urls(withoutWorkers)).to.deep.equal([
      'http://rel-audit-trail-api-internal:8081/readyz',
      'http://rel-audit-trail-internal:8081/readyz',
    ]);
    // A long release name still gives Service names of at most 63 characters.
    const long = await render(...EXISTING_SECRET, '--set', `fullnameOverride=${'x'.repeat(52)}`);
    for (const service of byKind(long, 'Service')) expect(service.metadata.name.length, service.metadata.name).to.be.at.most(63);
  });

  it('never puts the internal port (unauthenticated /metrics, ingestion) on the Service that service.type exposes', () => {
    const api = named(everything, 'Service', 'rel-audit-trail-api');
    expect(api.spec.type).to.equal('LoadBalancer');
    expect(api.spec.ports.map((port: { name: string }) => port.name)).to.deep.equal(['public']);
    for (const service of byKind(everything, 'Service')) {
      if (service.spec.ports.some((port: { name: string }) => port.name === 'internal'))
        expect(service.spec.type ?? 'ClusterIP', service.metadata.name).to.equal('ClusterIP');
    }
  });

  it('rolls the pods when the chart-managed Secret changes, and when the configuration does', async () => {
    const template = (manifests: Manifest[]) => named(manifests, 'Deployment', 'rel-audit-trail-api').spec.template;
    const checksum = (manifests: Manifest[]) => template(manifests).metadata.annotations['checksum/secret'];
    expect(checksum(defaults)).to.match(/^[0-9a-f]{64}$/);
    const otherUrl = await render(...GIVEN_SECRETS, '--set', 'secrets.redisUrl=rediss://redis.internal:6380');
    expect(checksum(otherUrl)).not.to.equal(checksum(defaults));
    expect(checksum(await render(...GIVEN_SECRETS))).to.equal(checksum(defaults));
    // Configuration is part of the pod template itself.
    const otherConfig = await render(...GIVEN_SECRETS, '--set', 'config.logLevel=debug');
    expect(template(otherConfig)).not.to.deep.equal(template(defaults));
    // A Secret the chart does not manage cannot be summed; nothing pretends to.
    expect(template(everything).metadata.annotations).not.to.have.property('checksum/secret');
  });

  it("pauses before SIGTERM so endpoints drain, with room for it and the service's own drain in the grace period", async () => {
    for (const deployment of byKind(defaults, 'Deployment')) {
      const pod = deployment.spec.template.spec;
      expect(pod.containers[0].lifecycle).to.deep.equal({ preStop: { sleep: { seconds: 5 } } });
      expect(environment(pod.containers[0])).to.include({ SHUTDOWN_GRACE_MS: '10000', SHUTDOWN_DRAIN_DELAY_MS: '5000' });
      // preStop sleep + drain delay + grace + 20 s for closing clients.
      expect(pod.terminationGracePeriodSeconds).to.equal(5 + 5 + 10 + 20);
    }
    const longer = named(everything, 'Deployment', 'rel-audit-trail-worker').spec.template.spec;
    expect(longer.containers[0].lifecycle.preStop.sleep.seconds).to.equal(10);
    expect(longer.terminationGracePeriodSeconds).to.equal(10 + 5 + 10 + 20);
    const off = named(await render(...EXISTING_SECRET, '--set', 'lifecycle.preStopSleepSeconds=0'), 'Deployment', 'rel-audit-trail-api')
      .spec.template.spec;
    expect(off.containers[0]).not.to.have.property('lifecycle');
  });

  it('pulls the image by digest when one is given', () => {
    for (const { owner, spec } of podSpecs(everything)) {
      expect(spec.containers[0].image, owner).to.equal(
        'registry.example.com/audit-trail@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef',
      );
    }
    expect(named(defaults, 'Deployment', 'rel-audit-trail-api').spec.template.spec.containers[0].image).to.equal(
      `ghcr.io/audit-trail/audit-trail:${APP_VERSION}`,
    );
  });

  it('sets NATS_STREAM_REPLICAS from config.natsStreamReplicas', () => {
    const replicas = (manifests: Manifest[]) =>
      environment(named(manifests, 'Deployment', 'rel-audit-trail-worker').spec.template.spec.containers[0]).NATS_STREAM_REPLICAS;
    expect(replicas(defaults)).to.equal('1');
    expect(replicas(everything)).to.equal('3');
  });

  it('mounts the certificates of the dependencies each pod uses and points the service at them; extraVolumes go everywhere', () => {
    const expected: Record<string, string[]> = {
      'Deployment/rel-audit-trail-api': ['DATABASE_SSL_CA', 'DATABASE_SSL_CERT', 'DATABASE_SSL_KEY', 'REDIS_TLS_CA'],
      'Deployment/rel-audit-trail-ingest': [
        'DATABASE_SSL_CA',
        'DATABASE_SSL_CERT',
        'DATABASE_SSL_KEY',
        'NATS_TLS_CA',
        'NATS_TLS_CERT',
        'NATS_TLS_KEY',
        'NATS_CREDS',
      ],
      'Deployment/rel-audit-trail-worker': [
        'DATABASE_SSL_CA',
        'DATABASE_SSL_CERT',
        'DATABASE_SSL_KEY',
        'NATS_TLS_CA',
        'NATS_TLS_CERT',
        'NATS_TLS_KEY',
        'REDIS_TLS_CA',
        'NATS_CREDS',
      ],
      'Deployment/rel-audit-trail-controller': ['DATABASE_SSL_CA', 'DATABASE_SSL_CERT', 'DATABASE_SSL_KEY'],
      'Job/rel-audit-trail-migrate': ['DATABASE_SSL_CA', 'DATABASE_SSL_CERT', 'DATABASE_SSL_KEY'],
    };
    const fileVariable = /^(DATABASE_SSL|REDIS_TLS|NATS_TLS)_(CA|CERT|KEY)$|^NATS_CREDS$/;
    for (const { owner, spec } of podSpecs(everything).filter(({ owner }) => owner in expected)) {
      const [container] = spec.containers;
      const env = environment(container);
      expect(
        Object.keys(env).filter((name) => fileVariable.test(name)),
        owner,
      ).to.deep.equal(expected[owner]);
      // Each file the service is told about is in a mounted Secret volume, under the same file name.
      for (const name of expected[owner]!) {
        const path = env[name] as string;
        const mount = container.volumeMounts.find((candidate: { mountPath: string }) => path.startsWith(`${candidate.mountPath}/`));
        expect(mount, `${owner} ${name}=${path}`).not.to.equal(undefined);
        expect(mount.readOnly).to.equal(true);
        const volume = spec.volumes.find((candidate: { name: string }) => candidate.name === mount.name);
        expect(
          volume.secret.items.map((item: { path: string }) => item.path),
          `${owner} ${name}`,
        ).to.include(path.slice(mount.mountPath.length + 1));
      }
      expect(
        container.volumeMounts.find((candidate: { name: string }) => candidate.name === 'corporate-ca'),
        owner,
      ).to.deep.include({ mountPath: '/etc/ssl/corporate' });
      // extraEnv comes after the chart's common and certificate variables, so it can override them.
      const names = container.env.map((variable: { name: string }) => variable.name);
      expect(names.indexOf('NODE_OPTIONS'), owner).to.be.above(
        Math.max(names.indexOf('DATABASE_URL'), ...expected[owner]!.map((name) => names.indexOf(name))),
      );
    }
    const ingestVolumes = named(everything, 'Deployment', 'rel-audit-trail-ingest').spec.template.spec.volumes;
    expect(ingestVolumes.find((volume: { name: string }) => volume.name === 'tls-nats').secret).to.deep.equal({
      secretName: 'nats-client-tls',
      defaultMode: 0o440,
      items: [
        { key: 'ca.crt', path: 'ca.crt' },
        { key: 'tls.crt', path: 'tls.crt' },
        { key: 'tls.key', path: 'tls.key' },
      ],
    });
    expect(ingestVolumes.find((volume: { name: string }) => volume.name === 'nats-credentials').secret.secretName).to.equal(
      'nats-audit-trail-user',
    );
    // Nothing of it without the values.
    for (const { owner, spec } of podSpecs(defaults).filter(({ owner }) => !owner.startsWith('Pod/'))) {
      expect(
        spec.volumes.map((volume: { name: string }) => volume.name),
        owner,
      ).to.deep.equal(['tmp']);
    }
  });

  describe('refuses values that contradict each other, naming them (the schema cannot compare two values)', () => {
    const cases: Array<[string, string[], RegExp]> = [
      [
        'a PDB that no eviction satisfies',
        ['--set', 'api.replicas=2', '--set', 'api.podDisruptionBudget.minAvailable=2'],
        /api\.podDisruptionBudget\.minAvailable \(2\) must be below api\.replicas \(2\)/,
      ],
      [
        'a PDB of 100%',
        ['--set', 'worker.podDisruptionBudget.minAvailable=100%'],
        /worker\.podDisruptionBudget\.minAvailable \(100%\) lets no pod be evicted/,
      ],
      [
        'a PDB above the autoscaler minimum',
        ['--set', 'ingest.autoscaling.enabled=true', '--set', 'ingest.autoscaling.minReplicas=1', '--set', 'ingest.replicas=5'],
        /ingest\.podDisruptionBudget\.minAvailable \(1\) must be below ingest\.autoscaling\.minReplicas \(1\)/,
      ],
      [
        'an autoscaler minimum above its maximum',
        ['--set', 'api.autoscaling.enabled=true', '--set', 'api.autoscaling.minReplicas=8', '--set', 'api.autoscaling.maxReplicas=4'],
        /api\.autoscaling\.minReplicas \(8\) must not exceed api\.autoscaling\.maxReplicas \(4\)/,
      ],
      [
        "the namespace's default ServiceAccount for the controller",
        ['--set', 'serviceAccount.create=false'],
        /serviceAccount\.name: with serviceAccount\.create=false, name an existing ServiceAccount other than "default"/,
      ],
      [
        '"default" named explicitly',
        ['--set', 'serviceAccount.create=false', '--set', 'serviceAccount.name=default'],
        /other than "default"/,
      ],
    ];
    for (const [what, args, message] of cases) {
      it(`refuses ${what}`, async () => {
        expect(await refusal(...EXISTING_SECRET, ...args)).to.match(message);
      });
    }

    it('accepts their consistent neighbours', async () => {
      await render(...EXISTING_SECRET, '--set', 'api.replicas=1', '--set', 'api.podDisruptionBudget.enabled=false');
      await render(...EXISTING_SECRET, '--set', 'worker.replicas=0');
      await render(...EXISTING_SECRET, '--set', 'api.podDisruptionBudget.minAvailable=50%');
      const own = await render(
        ...EXISTING_SECRET,
        '--set',
        'serviceAccount.create=false',
        '--set',
        'serviceAccount.name=audit-trail-controller',
      );
      expect(named(own, 'ClusterRoleBinding', 'audit.rel-audit-trail-controller').subjects).to.deep.equal([
        { kind: 'ServiceAccount', name: 'audit-trail-controller', namespace: 'audit' },
      ]);
      expect(byKind(own, 'ServiceAccount')).to.deep.equal([]);
      // Without the chart's RBAC nothing is bound, so the default ServiceAccount grants nothing new.
      const noRbac = await render(...EXISTING_SECRET, '--set', 'serviceAccount.create=false', '--set', 'rbac.create=false');
      expect([...byKind(noRbac, 'ClusterRoleBinding'), ...byKind(noRbac, 'RoleBinding')]).to.deep.equal([]);
    });
  });

  it("gives cluster-scoped objects names no other release's can take: team-audit-trail in x and audit-trail in x-team", async () => {
    const clusterScoped = async (release: string, namespace: string) =>
      (await helm(['template', release, CHART, '--namespace', namespace, ...EXISTING_SECRET])).stdout;
    const names = async (release: string, namespace: string) =>
      parseManifests(await clusterScoped(release, namespace))
        .filter((manifest) => manifest.kind === 'ClusterRole' || manifest.kind === 'ClusterRoleBinding')
        .map((manifest) => `${manifest.kind}/${manifest.metadata.name}`);
    const first = await names('team-audit-trail', 'x');
    const second = await names('audit-trail', 'x-team');
    expect(first).to.have.length(4);
    expect(first.filter((name) => second.includes(name))).to.deep.equal([]);
    expect(first).to.include('ClusterRole/x.team-audit-trail-controller');
  });

  it('lets a node drain evict pods that are not Ready: every PodDisruptionBudget has unhealthyPodEvictionPolicy AlwaysAllow', async () => {
    const budgets = byKind(everything, 'PodDisruptionBudget');
    expect(budgets).to.have.length(6);
    for (const budget of budgets) expect(budget.spec.unhealthyPodEvictionPolicy, budget.metadata.name).to.equal('AlwaysAllow');
    const { PodDisruptionBudget } = await import('kubernetes-models/policy/v1/PodDisruptionBudget');
    for (const budget of budgets) new PodDisruptionBudget(budget as never).validate();
  });

  it("tells in NOTES.txt how to uninstall: every kind's resources first, then the release", async () => {
    const installed = await helm(['install', 'rel', CHART, '--namespace', 'audit', '--dry-run=client', ...EXISTING_SECRET]);
    expect(installed.code, installed.stderr).to.equal(0);
    const notes = installed.stdout.slice(installed.stdout.indexOf('NOTES:'));
    const { RESOURCE_KINDS } = await import('../../src/controller/resourceKinds.ts');
    const plurals = RESOURCE_KINDS.map((kind) => kind.plural);
    expect(plurals).to.have.length(5);
    expect(notes).to.include(`kubectl delete ${plurals.join(',')} --all-namespaces --all`);
    expect(notes).to.include('helm uninstall rel -n audit');
    for (const doc of ['docs/operations.md', 'docs/kubernetes.md'])
      expect(readFileSync(doc, 'utf8'), doc).to.include(`kubectl delete ${plurals.join(',')} --all-namespaces --all`);
  });

  it('requires the Kubernetes version docs/operations.md names', async () => {
    const chart = readFileSync(`${CHART}/Chart.yaml`, 'utf8');
    const [, minor] = /^kubeVersion: ">=1\.(\d+)\.0-0"$/m.exec(chart)!;
    expect(readFileSync('docs/operations.md', 'utf8')).to.include(`Kubernetes 1.${minor}+`);
    expect(await refusal(...EXISTING_SECRET, '--kube-version', `1.${Number(minor) - 1}.9`)).to.match(/kubeVersion/i);
    await render(...EXISTING_SECRET, '--kube-version', `1.${minor}.0`);
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
      [
        'an extraEnv value that is not a string',
        ['--set', 'config.extraEnv[0].name=RETRIES', '--set', 'config.extraEnv[0].value=3'],
        /\/config\/extraEnv\/0\/value/,
      ],
      ['an extraEnv entry with neither value nor valueFrom', ['--set', 'config.extraEnv[0].name=EMPTY'], /\/config\/extraEnv\/0/],
      ['two stream replicas', ['--set', 'config.natsStreamReplicas=2'], /\/config\/natsStreamReplicas/],
      ['a digest that is not sha256', ['--set', 'image.digest=latest'], /\/image\/digest/],
      ['a misspelt TLS option', ['--set', 'dependencyTls.postgres.secret=x'], /\/dependencyTls\/postgres/],
      ['an egress rule for something the chart does not reach', ['--set', 'networkPolicy.egress.mysql.to=null'], /\/networkPolicy\/egress/],
      ['a global pull secret without a name', ['--set', 'global.imagePullSecrets[0].secret=x'], /\/global\/imagePullSecrets\/0/],
    ];
    for (const [what, args, message] of cases) {
      it(`refuses ${what}`, async () => {
        const result = await helm(['template', 'rel', CHART, ...args]);
        expect(result.code).not.to.equal(0);
        expect(result.stderr).to.match(message);
      });
    }
  });

  it('ships crds/ identical to the top-level crds/', () => {
    const list = (directory: string) =>
      existsSync(directory)
        ? readdirSync(directory)
            .filter((name) => name.endsWith('.yaml'))
            .sort()
        : [];
    const top = list('crds');
    expect(list(`${CHART}/crds`)).to.deep.equal(top);
    for (const name of top) expect(readFileSync(`${CHART}/crds/${name}`, 'utf8'), name).to.equal(readFileSync(`crds/${name}`, 'utf8'));
  });
});
