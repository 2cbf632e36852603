import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHART, helm, type HelmResult } from './helm.ts';

/**
 * Just enough of a Kubernetes API for `helm template --dry-run=server` (and `helm install --dry-run=server`):
 * discovery of every kind the chart renders, get of any object put in place and list of Secrets. That is
 * what a chart's `lookup` needs to see a cluster; nothing is ever written. (test/support/kube-apiserver is the
 * fuller stand-in for the controller; its discovery knows only the controller's kinds.)
 */
export interface HelmCluster {
  readonly kubeconfigPath: string;
  /** Every request, in order: `GET /api/v1/...`. */
  readonly requests: string[];
  /** Puts a Secret (stringData or data) in place, as if created by an earlier install. */
  putSecret(secret: {
    metadata: { name: string; namespace: string };
    data?: Record<string, string>;
    stringData?: Record<string, string>;
  }): void;
  /** Puts any object of a kind the discovery knows in place (a CRD installed by another release). */
  put(object: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; [key: string]: unknown } }): void;
  /** Removes what put() or putSecret() placed. */
  remove(apiVersion: string, kind: string, name: string, namespace?: string): void;
  /** `helm template` of the chart against this cluster (--dry-run=server), as helm install or upgrade renders it. */
  render(release: string, namespace: string, args: string[]): Promise<HelmResult>;
  stop(): Promise<void>;
}

const GROUPS: Record<string, Array<[plural: string, kind: string, namespaced: boolean]>> = {
  v1: [
    ['secrets', 'Secret', true],
    ['serviceaccounts', 'ServiceAccount', true],
    ['services', 'Service', true],
    ['pods', 'Pod', true],
    ['configmaps', 'ConfigMap', true],
    ['namespaces', 'Namespace', false],
  ],
  'apps/v1': [['deployments', 'Deployment', true]],
  'batch/v1': [['jobs', 'Job', true]],
  'policy/v1': [['poddisruptionbudgets', 'PodDisruptionBudget', true]],
  'autoscaling/v2': [['horizontalpodautoscalers', 'HorizontalPodAutoscaler', true]],
  'networking.k8s.io/v1': [
    ['ingresses', 'Ingress', true],
    ['networkpolicies', 'NetworkPolicy', true],
  ],
  'rbac.authorization.k8s.io/v1': [
    ['roles', 'Role', true],
    ['rolebindings', 'RoleBinding', true],
    ['clusterroles', 'ClusterRole', false],
    ['clusterrolebindings', 'ClusterRoleBinding', false],
  ],
  'apiextensions.k8s.io/v1': [['customresourcedefinitions', 'CustomResourceDefinition', false]],
  'monitoring.coreos.com/v1': [['servicemonitors', 'ServiceMonitor', true]],
};

/** Where an object lives: `<group/version>|<plural>|<namespace>|<name>`. */
function objectKey(groupVersion: string, plural: string, namespace: string | undefined, name: string): string {
  return `${groupVersion}|${plural}|${namespace ?? ''}|${name}`;
}

function pluralOf(apiVersion: string, kind: string): string {
  const found = GROUPS[apiVersion]?.find(([, candidate]) => candidate === kind);
  if (!found) throw new Error(`the helm cluster stand-in serves no ${apiVersion} ${kind}`);
  return found[0];
}

export async function startHelmCluster(): Promise<HelmCluster> {
  const requests: string[] = [];
  const objects = new Map<string, { metadata: { namespace?: string }; [key: string]: unknown }>();

  const answer = (response: ServerResponse, status: number, body: unknown) => {
    response.writeHead(status, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  };
  const notFound = (response: ServerResponse, what: string) =>
    answer(response, 404, {
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'NotFound',
      code: 404,
      message: `${what} not found`,
    });

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const path = new URL(request.url!, 'http://localhost').pathname;
    requests.push(`${request.method} ${path}`);
    if (request.method !== 'GET') return answer(response, 405, { kind: 'Status', code: 405, message: 'read-only' });
    if (path === '/version') return answer(response, 200, { major: '1', minor: '34', gitVersion: 'v1.34.0', platform: 'linux/amd64' });
    if (path === '/api') return answer(response, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
    if (path === '/apis') {
      const groups = Object.keys(GROUPS)
        .filter((groupVersion) => groupVersion.includes('/'))
        .map((groupVersion) => {
          const [name, version] = groupVersion.split('/');
          return { name, versions: [{ groupVersion, version }], preferredVersion: { groupVersion, version } };
        });
      return answer(response, 200, { kind: 'APIGroupList', apiVersion: 'v1', groups });
    }
    const groupVersion = path === '/api/v1' ? 'v1' : path.startsWith('/apis/') ? path.split('/').slice(2, 4).join('/') : undefined;
    if (groupVersion !== undefined && (path === '/api/v1' || path === `/apis/${groupVersion}`) && GROUPS[groupVersion]) {
      const resources = GROUPS[groupVersion].map(([name, kind, namespaced]) => ({
        name,
        singularName: '',
        namespaced,
        kind,
        verbs: ['get', 'list', 'create', 'update', 'patch', 'delete', 'watch'],
      }));
      return answer(response, 200, { kind: 'APIResourceList', apiVersion: 'v1', groupVersion, resources });
    }
    const secretList = /^\/api\/v1\/namespaces\/([^/]+)\/secrets$/.exec(path);
    if (secretList) {
      const items = [...objects.entries()]
        .filter(([key, object]) => key.startsWith('v1|secrets|') && object.metadata.namespace === secretList[1])
        .map(([, object]) => object);
      return answer(response, 200, { kind: 'SecretList', apiVersion: 'v1', metadata: { resourceVersion: '1' }, items });
    }
    // GET of one object: /api/v1/[namespaces/<ns>/]<plural>/<name> or /apis/<group>/<version>/[namespaces/<ns>/]<plural>/<name>.
    const single = /^\/(?:api\/(v1)|apis\/([^/]+\/[^/]+))(?:\/namespaces\/([^/]+))?\/([^/]+)\/([^/]+)$/.exec(path);
    if (single) {
      const [, core, group, namespace, plural, name] = single;
      const object = objects.get(objectKey(core ?? group!, plural!, namespace, name!));
      return object ? answer(response, 200, object) : notFound(response, `${plural} "${name}"`);
    }
    return notFound(response, path);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const dir = mkdtempSync(join(tmpdir(), 'audit-trail-helm-cluster-'));
  const kubeconfigPath = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfigPath,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'stand-in', cluster: { server: `http://127.0.0.1:${port}` } }],
      users: [{ name: 'deployer', user: { token: 'deployer' } }],
      contexts: [{ name: 'stand-in', context: { cluster: 'stand-in', user: 'deployer' } }],
      'current-context': 'stand-in',
    }),
    { mode: 0o600 },
  );

  return {
    kubeconfigPath,
    requests,
    putSecret(secret) {
      const data =
        secret.data ??
        Object.fromEntries(Object.entries(secret.stringData ?? {}).map(([key, value]) => [key, Buffer.from(value).toString('base64')]));
      objects.set(objectKey('v1', 'secrets', secret.metadata.namespace, secret.metadata.name), {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: secret.metadata,
        data,
      });
    },
    put(object) {
      objects.set(
        objectKey(object.apiVersion, pluralOf(object.apiVersion, object.kind), object.metadata.namespace, object.metadata.name),
        object,
      );
    },
    render(release, namespace, args) {
      return helm([
        'template',
        release,
        CHART,
        '--namespace',
        namespace,
        '--dry-run=server',
        '--disable-openapi-validation',
        '--kubeconfig',
        kubeconfigPath,
        ...args,
      ]);
    },
    remove(apiVersion, kind, name, namespace) {
      objects.delete(objectKey(apiVersion, pluralOf(apiVersion, kind), namespace, name));
    },
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
