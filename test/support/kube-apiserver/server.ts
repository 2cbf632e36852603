import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { violatedRules } from './celRules.ts';
import { CRD_COLLECTION, CustomResourceTypes, prune, readCrdFiles, type ResourceType } from './customResources.ts';
import { ApiError, ObjectStore, type KubeObject } from './objectStore.ts';
import { parseFieldSelector, parseLabelSelector, type Selector } from './selectors.ts';
import { serverSideApply } from './serverSideApply.ts';
import { GENERATED_NAME_BASE_MAX, decodeAsTheServerDoes, invalidObject, validateAsTheServerDoes } from './wireFormats.ts';

/**
 * A stand-in for the Kubernetes API server, on loopback, for the controller's tests (no real API server
 * can run on these machines). Faithful where controllers depend on it: REST paths of core, group and
 * custom resources, list + watch with resourceVersion, BOOKMARK and 410 Gone, the status subresource,
 * generation, optimistic concurrency (409), merge, JSON and apply patches, finalizers and deletionTimestamp,
 * owner-reference garbage collection, CustomResourceDefinitions as objects that define what is served, with
 * admission against their OpenAPI schemas, pruning of undeclared fields (customResources.ts) and their
 * x-kubernetes-validations CEL rules (celRules.ts), label and field selectors on list and watch
 * (selectors.ts; a watched object that stops or starts matching arrives as DELETED or ADDED), and custom
 * resources served with their keys sorted at every level, as the real server's JSON encoding of
 * unstructured objects does (built-in types keep their field order). Strict at the wire as the real server
 * (wireFormats.ts): MicroTime and Time as Go parses them, names, labels and annotations within their limits,
 * the validation of the built-in kinds, each refusal answered with the Status (400 or 422) the server sends.
 * Simplified: legacy discovery only (kubectl then runs with --validate=false: no OpenAPI document), a
 * simplified server-side apply (serverSideApply.ts), no Table output (kubectl get -o json/yaml/name work), no defaulting,
 * strategic merge treated as a merge patch, no authentication, and a namespace created with the first object
 * created in it (a real server refuses objects in a namespace that does not exist).
 */

export interface KubeApiServer {
  readonly url: string;
  readonly store: ObjectStore;
  /** Every request, in order: `GET /apis/...`. */
  readonly requests: string[];
  /**
   * Every request with the bearer token that made it, to tell the controller's calls from a test's, when it
   * arrived and, once answered, the response status (a refused write, 409 or 422, changed nothing).
   */
  readonly requestLog: Array<{
    token: string;
    method: string;
    path: string;
    /** The field selector of a list or watch (RBAC matches resourceNames on list and watch by metadata.name). */
    fieldSelector?: string;
    watch: boolean;
    at: number;
    status?: number;
    /** The body of a write (POST, PUT, PATCH) as it arrived. */
    body?: string;
  }>;
  /** A client configuration; the token only labels the caller in requestLog (no authorisation here). */
  kubeConfig(token?: string): KubeConfig;
  /** A kubeconfig file for a real kubectl. */
  readonly kubeconfigPath: string;
  /** Drops the watch history: the next watch from an older resourceVersion gets 410 Gone. */
  compact(): void;
  /** Cuts every open watch, as a load balancer or an API server restart does. */
  closeWatches(): void;
  /**
   * Answers the matching requests with 503 ServiceUnavailable (an overloaded or restarting API server), or
   * with `answer` (a 403 of RBAC, say), until called again without a predicate.
   */
  refuse(
    predicate?: (request: { token: string; method: string; path: string; watch: boolean }) => boolean,
    answer?: { code: number; reason: string; message: string },
  ): void;
  stop(): Promise<void>;
}

const BUILT_IN: ResourceType[] = [
  { group: '', version: 'v1', plural: 'namespaces', kind: 'Namespace', namespaced: false, statusSubresource: false, custom: false },
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true, statusSubresource: false, custom: false },
  { group: '', version: 'v1', plural: 'events', kind: 'Event', namespaced: true, statusSubresource: false, custom: false },
  { group: 'events.k8s.io', version: 'v1', plural: 'events', kind: 'Event', namespaced: true, statusSubresource: false, custom: false },
  {
    group: 'coordination.k8s.io',
    version: 'v1',
    plural: 'leases',
    kind: 'Lease',
    namespaced: true,
    statusSubresource: false,
    custom: false,
  },
  {
    group: 'apiextensions.k8s.io',
    version: 'v1',
    plural: 'customresourcedefinitions',
    singular: 'customresourcedefinition',
    shortNames: ['crd', 'crds'],
    kind: 'CustomResourceDefinition',
    namespaced: false,
    statusSubresource: false,
    custom: false,
  },
];

const VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
const NAMESPACE_COLLECTION = 'core/v1/namespaces';

/**
 * Legacy discovery (/api, /api/v1, /apis, /apis/g/v): enough for kubectl to map kinds and short names to
 * resources. kubectl asks for aggregated discovery first and falls back to this when it gets plain JSON.
 */
function discovery(path: string, types: readonly ResourceType[]): unknown {
  const groups = [...new Set(types.filter((type) => type.group).map((type) => `${type.group}/${type.version}`))];
  const resourceList = (groupVersion: string) => ({
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion,
    resources: types
      .filter((type) => apiVersionOf(type) === groupVersion)
      .flatMap((type) => [
        {
          name: type.plural,
          singularName: type.singular ?? type.kind.toLowerCase(),
          namespaced: type.namespaced,
          kind: type.kind,
          verbs: VERBS,
          ...(type.shortNames?.length ? { shortNames: type.shortNames } : {}),
          ...(type.categories?.length ? { categories: type.categories } : {}),
        },
        ...(type.statusSubresource
          ? [
              {
                name: `${type.plural}/status`,
                singularName: '',
                namespaced: type.namespaced,
                kind: type.kind,
                verbs: ['get', 'patch', 'update'],
              },
            ]
          : []),
      ]),
  });
  if (path === '/api')
    return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }] };
  if (path === '/api/v1') return resourceList('v1');
  if (path === '/apis') {
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: groups.map((groupVersion) => {
        const [name, version] = groupVersion.split('/');
        return { name, versions: [{ groupVersion, version }], preferredVersion: { groupVersion, version } };
      }),
    };
  }
  const match = /^\/apis\/([^/]+)\/([^/]+)$/.exec(path);
  if (match && groups.includes(`${match[1]}/${match[2]}`)) return resourceList(`${match[1]}/${match[2]}`);
  if (path === '/version') return { major: '1', minor: '34', gitVersion: 'v1.34.0-standin', platform: 'linux/amd64' };
  return undefined;
}

const collectionOf = (type: ResourceType) => `${type.group || 'core'}/${type.version}/${type.plural}`;
const apiVersionOf = (type: ResourceType) => (type.group ? `${type.group}/${type.version}` : type.version);

/** Parses /api/v1/... and /apis/g/v/... paths. */
function route(path: string, types: readonly ResourceType[]) {
  const parts = path.split('/').filter(Boolean);
  let group = '';
  let version: string;
  let rest: string[];
  if (parts[0] === 'api') [version, rest] = [parts[1]!, parts.slice(2)];
  else if (parts[0] === 'apis') [group, version, rest] = [parts[1]!, parts[2]!, parts.slice(3)];
  else throw new ApiError(404, 'NotFound', `the server could not find the requested resource (${path})`);
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) [namespace, rest] = [rest[1], rest.slice(2)];
  const [plural, name, subresource] = rest;
  const type = types.find((candidate) => candidate.group === group && candidate.version === version && candidate.plural === plural);
  if (!type) throw new ApiError(404, 'NotFound', `the server could not find the requested resource (${path})`);
  if (subresource !== undefined && (subresource !== 'status' || !type.statusSubresource))
    throw new ApiError(404, 'NotFound', `no subresource ${subresource}`);
  return { type, namespace, name, status: subresource === 'status' };
}

/** A metav1.Status, as the server answers every refusal. */
function statusBody(error: ApiError) {
  const causes = error.causes.map((cause) => ({ reason: 'FieldValueInvalid', ...cause }));
  const details = { ...error.details, ...(causes.length > 0 ? { causes } : {}) };
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: error.message,
    reason: error.reason,
    ...(Object.keys(details).length > 0 ? { details } : {}),
    code: error.code,
  };
}

/** Go's encoding/json writes map keys sorted, so an unstructured object comes back sorted at every level. */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortedKeys((value as Record<string, unknown>)[key])]),
  );
}

/** RFC 7386. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const result: Record<string, unknown> =
    target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

/** RFC 6902 (add, remove, replace, test). */
function jsonPatch(target: KubeObject, operations: Array<{ op: string; path: string; value?: unknown }>): KubeObject {
  const document = structuredClone(target) as any;
  for (const operation of operations) {
    const segments = operation.path
      .split('/')
      .slice(1)
      .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = segments.pop()!;
    let parent = document;
    for (const segment of segments) parent = parent?.[segment];
    if (parent === undefined) throw new ApiError(422, 'Invalid', `path ${operation.path} does not exist`);
    const index = Array.isArray(parent) ? (last === '-' ? parent.length : Number(last)) : last;
    switch (operation.op) {
      case 'add':
        if (Array.isArray(parent)) parent.splice(index as number, 0, operation.value);
        else parent[index] = operation.value;
        break;
      case 'replace':
        parent[index] = operation.value;
        break;
      case 'remove':
        if (Array.isArray(parent)) parent.splice(index as number, 1);
        else delete parent[index];
        break;
      case 'test':
        if (JSON.stringify(parent[index]) !== JSON.stringify(operation.value))
          throw new ApiError(422, 'Invalid', `test operation failed at ${operation.path}`);
        break;
      default:
        throw new ApiError(400, 'BadRequest', `unsupported patch operation ${operation.op}`);
    }
  }
  return document;
}

export async function startKubeApiServer(options: { crdDirectories: readonly string[] }): Promise<KubeApiServer> {
  const store = new ObjectStore();
  for (const crd of readCrdFiles(options.crdDirectories)) store.create(CRD_COLLECTION, crd, { generation: true });
  const customTypes = new CustomResourceTypes();
  /** What is served right now: the built-in types and those of the CRDs stored at this moment. */
  const servedTypes = () => [...BUILT_IN, ...customTypes.typesOf(store.list(CRD_COLLECTION, undefined))];
  const requests: string[] = [];
  const requestLog: KubeApiServer['requestLog'] = [];
  const watches = new Set<ServerResponse>();
  let refusal: Parameters<KubeApiServer['refuse']>[0];
  let refusalAnswer: Parameters<KubeApiServer['refuse']>[1];
  const encode = (type: ResourceType, body: unknown) => JSON.stringify(type.custom ? sortedKeys(body) : body);

  function admit(type: ResourceType, object: KubeObject, stored?: KubeObject): KubeObject {
    object.apiVersion = apiVersionOf(type);
    object.kind = type.kind;
    if (type.kind === 'Secret' && object.stringData) {
      // As the API server does: stringData is merged into data, base64-encoded, and never stored.
      const data = { ...(object.data as Record<string, string> | undefined) };
      for (const [key, value] of Object.entries(object.stringData as Record<string, string>))
        data[key] = Buffer.from(value).toString('base64');
      object.data = data;
      delete object.stringData;
    }
    // What the Go types cannot decode is a 400; what validation refuses, a 422 (wireFormats.ts).
    decodeAsTheServerDoes(type, object);
    validateAsTheServerDoes(type, object);
    // As apiextensions-apiserver does: what the schema does not declare is dropped before validation.
    if (type.schema) object = prune(object, type.schema);
    const validate = type.validate;
    if (validate && !validate(object as unknown)) {
      const causes = (validate.errors ?? []).map((error) => ({
        field: error.instancePath.split('/').filter(Boolean).join('.') || '<root>',
        message: error.message ?? 'invalid',
      }));
      throw invalidObject(type, object.metadata.name, causes);
    }
    const violations = type.schema ? violatedRules(type.schema, object, stored) : [];
    if (violations.length > 0) throw invalidObject(type, object.metadata.name, violations);
    return object;
  }

  /**
   * A namespace comes into being with the first object created in it, as if `kubectl create namespace` had
   * come first (a real server answers 404 for a namespace that does not exist): tests need not create each.
   */
  function ensureNamespace(name: string): void {
    try {
      store.get(NAMESPACE_COLLECTION, undefined, name);
      return;
    } catch {
      // not there yet
    }
    store.create(NAMESPACE_COLLECTION, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } }, { generation: false });
  }

  async function readText(request: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }

  function parseBody(text: string | undefined): any {
    try {
      return !text ? undefined : JSON.parse(text);
    } catch {
      throw new ApiError(400, 'BadRequest', 'request body is not JSON');
    }
  }

  function watch(response: ServerResponse, type: ResourceType, namespace: string | undefined, url: URL, selected: Selector): void {
    const from = Number(url.searchParams.get('resourceVersion') || store.currentRevision);
    response.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    // As the real server does: the watch is established (headers sent) before any event.
    response.flushHeaders();
    const send = (event: unknown) => response.write(`${encode(type, event)}\n`);
    let unsubscribe: () => void = () => undefined;
    try {
      unsubscribe = store.subscribe(from, (event) => {
        if (event.collection !== collectionOf(type)) return;
        if (namespace !== undefined && event.object.metadata.namespace !== namespace) return;
        if (event.type !== 'MODIFIED' || !event.previous) {
          if (selected(event.object)) send({ type: event.type, object: event.object });
          return;
        }
        // As the watch cache does: an object that starts matching is ADDED, one that stops matching is
        // DELETED (its previous content at the new resourceVersion).
        const matches = selected(event.object);
        const matched = selected(event.previous);
        if (matches) send({ type: matched ? 'MODIFIED' : 'ADDED', object: event.object });
        else if (matched)
          send({
            type: 'DELETED',
            object: { ...event.previous, metadata: { ...event.previous.metadata, resourceVersion: event.object.metadata.resourceVersion } },
          });
      });
    } catch (error) {
      send({ type: 'ERROR', object: statusBody(error as ApiError) });
      response.end();
      return;
    }
    const bookmarks =
      url.searchParams.get('allowWatchBookmarks') === 'true'
        ? setInterval(
            () =>
              send({
                type: 'BOOKMARK',
                object: { kind: type.kind, apiVersion: apiVersionOf(type), metadata: { resourceVersion: String(store.currentRevision) } },
              }),
            1_000,
          )
        : undefined;
    const timeout = Number(url.searchParams.get('timeoutSeconds') ?? 0);
    // As the real API server does: a watch ends after the timeoutSeconds its client asked for.
    const timer = timeout > 0 ? setTimeout(() => response.end(), timeout * 1000) : undefined;
    watches.add(response);
    response.on('close', () => {
      unsubscribe();
      clearInterval(bookmarks);
      clearTimeout(timer);
      watches.delete(response);
    });
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url!, 'http://localhost');
    requests.push(`${request.method} ${url.pathname}${url.search}`);
    const watching = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const entry: KubeApiServer['requestLog'][number] = {
      token: String(request.headers.authorization ?? '').replace(/^Bearer /, ''),
      method: request.method!,
      path: url.pathname,
      ...(url.searchParams.has('fieldSelector') ? { fieldSelector: url.searchParams.get('fieldSelector')! } : {}),
      watch: watching,
      at: Date.now(),
    };
    requestLog.push(entry);
    response.on('finish', () => (entry.status = response.statusCode));
    const writing = ['POST', 'PUT', 'PATCH'].includes(request.method!);
    // Read once here, kept for tests that check what was sent: the handlers below read it from the entry.
    if (writing) entry.body = await readText(request);
    if (refusal?.(entry)) {
      const { code, reason, message } = refusalAnswer ?? {
        code: 503,
        reason: 'ServiceUnavailable',
        message: 'the server is currently unable to handle the request',
      };
      throw new ApiError(code, reason, message);
    }
    const types = servedTypes();
    const discovered = request.method === 'GET' ? discovery(url.pathname, types) : undefined;
    if (discovered) {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(discovered));
      return;
    }
    const { type, namespace, name, status } = route(url.pathname, types);
    const collection = collectionOf(type);
    const reply = (code: number, body: unknown) => {
      response.writeHead(code, { 'content-type': 'application/json' }).end(encode(type, body));
    };
    switch (request.method) {
      case 'GET': {
        if (name) return reply(200, store.get(collection, namespace, name));
        const labels = parseLabelSelector(url.searchParams.get('labelSelector'));
        const fields = parseFieldSelector(url.searchParams.get('fieldSelector'), type);
        const selected = (object: KubeObject) => labels(object) && fields(object);
        if (watching) return watch(response, type, namespace, url, selected);
        const items = store.list(collection, namespace).filter(selected);
        return reply(200, {
          kind: `${type.kind}List`,
          apiVersion: apiVersionOf(type),
          metadata: { resourceVersion: String(store.currentRevision) },
          items,
        });
      }
      case 'POST': {
        const body = parseBody(entry.body) as KubeObject;
        body.metadata ??= { name: '' };
        // As the name generator does: the prefix cut to 58 characters, then five random ones.
        if (!body.metadata.name && body.metadata.generateName)
          body.metadata.name = `${String(body.metadata.generateName).slice(0, GENERATED_NAME_BASE_MAX)}${Math.random().toString(36).slice(2, 7).padEnd(5, '0')}`;
        if (type.namespaced) body.metadata.namespace = namespace;
        const created = store.create(collection, admit(type, body), { generation: type.statusSubresource });
        if (type.namespaced) ensureNamespace(namespace!);
        return reply(201, created);
      }
      case 'PUT': {
        const body = parseBody(entry.body) as KubeObject;
        if (type.namespaced) body.metadata.namespace = namespace;
        const stored = store.get(collection, namespace, body.metadata.name);
        return reply(200, store.update(collection, admit(type, body, stored), { generation: type.statusSubresource, statusOnly: status }));
      }
      case 'PATCH': {
        const contentType = String(request.headers['content-type'] ?? '').split(';')[0];
        if (contentType === 'application/apply-patch+yaml') {
          const manager = url.searchParams.get('fieldManager');
          if (!manager)
            throw new ApiError(422, 'Invalid', 'fieldManager is required for apply requests', [
              { field: 'fieldManager', message: 'Required value' },
            ]);
          const config = load(entry.body ?? '') as KubeObject;
          const existing = store.list(collection, namespace).find((object) => object.metadata.name === name);
          const applied = serverSideApply(existing, config, manager, url.searchParams.get('force') === 'true');
          if (type.namespaced) applied.metadata.namespace = namespace;
          if (!existing) {
            const created = store.create(collection, admit(type, applied), { generation: type.statusSubresource });
            if (type.namespaced) ensureNamespace(namespace!);
            return reply(201, created);
          }
          applied.metadata.resourceVersion = existing.metadata.resourceVersion;
          return reply(
            200,
            store.update(collection, admit(type, applied, existing), { generation: type.statusSubresource, statusOnly: status }),
          );
        }
        const current = store.get(collection, namespace, name!);
        const patch = parseBody(entry.body);
        let patched: KubeObject;
        if (contentType === 'application/json-patch+json') patched = jsonPatch(current, patch);
        else if (contentType === 'application/merge-patch+json' || contentType === 'application/strategic-merge-patch+json')
          patched = mergePatch(current, patch) as KubeObject;
        else
          throw new ApiError(
            415,
            'UnsupportedMediaType',
            `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
          );
        // A patch applies to the current version unless it names one itself.
        if (!patch?.metadata?.resourceVersion && contentType !== 'application/json-patch+json')
          patched.metadata.resourceVersion = current.metadata.resourceVersion;
        return reply(
          200,
          store.update(collection, admit(type, patched, current), { generation: type.statusSubresource, statusOnly: status }),
        );
      }
      case 'DELETE':
        return reply(200, store.delete(collection, namespace, name!));
      default:
        throw new ApiError(405, 'MethodNotAllowed', `${request.method} is not supported`);
    }
  }

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      const apiError = error instanceof ApiError ? error : new ApiError(500, 'InternalError', String(error));
      if (!response.headersSent)
        response.writeHead(apiError.code, { 'content-type': 'application/json' }).end(JSON.stringify(statusBody(apiError)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const kubeconfigPath = join(mkdtempSync(join(tmpdir(), 'kube-standin-')), 'kubeconfig');
  writeFileSync(
    kubeconfigPath,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      // client-node refuses plain http unless TLS verification is off; the stand-in speaks http on loopback.
      clusters: [{ name: 'stand-in', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'controller', user: { token: 'stand-in-token' } }],
      contexts: [{ name: 'stand-in', context: { cluster: 'stand-in', user: 'controller', namespace: 'default' } }],
      'current-context': 'stand-in',
    }),
  );
  return {
    url,
    store,
    requests,
    requestLog,
    kubeconfigPath,
    kubeConfig(token = 'controller') {
      const config = new KubeConfig();
      config.loadFromOptions({
        clusters: [{ name: 'stand-in', server: url, skipTLSVerify: true }],
        users: [{ name: 'controller', token }],
        contexts: [{ name: 'stand-in', cluster: 'stand-in', user: 'controller' }],
        currentContext: 'stand-in',
      });
      return config;
    },
    compact: () => store.compact(),
    closeWatches() {
      for (const response of watches) response.destroy();
    },
    refuse(predicate, answer) {
      refusal = predicate;
      refusalAnswer = answer;
    },
    async stop() {
      for (const response of watches) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dirname(kubeconfigPath), { recursive: true, force: true });
    },
  };
}
