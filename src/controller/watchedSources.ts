import {
  ListWatch,
  Watch,
  type CoreV1Api,
  type CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1OwnerReference,
} from '@kubernetes/client-node';
import { OWNED_SECRET_LABEL, OWNED_SECRET_LABEL_VALUE } from './kubeResources.ts';
import { RESOURCE_KINDS } from './resourceKinds.ts';
import { GROUP, VERSION, type ResourceKind } from './resources.ts';

/**
 * Where the controller lists and watches: the resources of each kind and the Secrets it owns (by label), in
 * every namespace (empty `namespaces`) or in each watched one, and the Namespaces themselves (their tenant
 * bindings: tenancy.ts), all of them or each watched one by name; and the work-queue keys they map to.
 */
interface WatchedSource {
  readonly path: string;
  readonly list: () => Promise<KubernetesListObject<KubernetesObject>>;
}

const OWNED_SECRETS = `${OWNED_SECRET_LABEL}=${OWNED_SECRET_LABEL_VALUE}`;

function resourceSources(custom: CustomObjectsApi, namespaces: readonly string[], resource: ResourceKind): WatchedSource[] {
  const base = `/apis/${GROUP}/${VERSION}`;
  if (namespaces.length === 0) {
    return [
      {
        path: `${base}/${resource.plural}`,
        list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: resource.plural }),
      },
    ];
  }
  return namespaces.map((namespace) => ({
    path: `${base}/namespaces/${namespace}/${resource.plural}`,
    list: () => custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: resource.plural }),
  }));
}

function ownedSecretSources(core: CoreV1Api, namespaces: readonly string[]): WatchedSource[] {
  if (namespaces.length === 0) {
    return [{ path: '/api/v1/secrets', list: () => core.listSecretForAllNamespaces({ labelSelector: OWNED_SECRETS }) }];
  }
  return namespaces.map((namespace) => ({
    path: `/api/v1/namespaces/${namespace}/secrets`,
    list: () => core.listNamespacedSecret({ namespace, labelSelector: OWNED_SECRETS }),
  }));
}

function namespaceSources(core: CoreV1Api, namespaces: readonly string[]): Array<WatchedSource & { fieldSelector?: string }> {
  if (namespaces.length === 0) return [{ path: '/api/v1/namespaces', list: () => core.listNamespace() }];
  // One by name each, so that RBAC can name them (resourceNames) as it names the CRDs.
  return namespaces.map((namespace) => {
    const fieldSelector = `metadata.name=${namespace}`;
    return { path: '/api/v1/namespaces', fieldSelector, list: () => core.listNamespace({ fieldSelector }) };
  });
}

export function queueKey(plural: string, namespace: string | undefined, name: string | undefined): string {
  return `${plural}/${namespace}/${name}`;
}

/** The work-queue key of the resource (of any of our kinds) that controls a Secret, if one does. */
export function ownerKey(references: V1OwnerReference[] | undefined, namespace: string | undefined): string | undefined {
  const owner = references?.find((reference) => reference.controller && reference.apiVersion === `${GROUP}/${VERSION}`);
  const plural = RESOURCE_KINDS.find((resource) => resource.kind === owner?.kind)?.plural;
  return plural && owner ? queueKey(plural, namespace, owner.name) : undefined;
}

/** The copy of an object that one of these informers (one per watched namespace, or one for all) holds. */
export function cachedObject(
  informers: readonly ListWatch<KubernetesObject>[] | undefined,
  namespace: string,
  name: string,
): KubernetesObject | undefined {
  return informers?.map((informer) => informer.get(name, namespace)).find(Boolean);
}

/** The Namespace `name` as the `namespaces` informers hold it, if they do. */
export function cachedNamespace(informers: Informers, name: string): KubernetesObject | undefined {
  return informers
    .get(NAMESPACES)
    ?.map((informer) => informer.get(name))
    .find(Boolean);
}

/** The key of the Namespace informers among a run's informers. */
export const NAMESPACES = 'namespaces';

/**
 * The informers of one reconciling run: per kind (its plural), `secrets` for the Secrets the controller owns,
 * and `namespaces` for the Namespaces of its resources.
 */
export type Informers = Map<string, ListWatch<KubernetesObject>[]>;

export interface InformerHandlers {
  readonly kinds: readonly ResourceKind[];
  /** A resource of the kind `plural` was listed, added or updated. */
  onResource(plural: string, object: KubernetesObject): void;
  /** An owned Secret was listed, added, updated or deleted. */
  onOwnedSecret(secret: KubernetesObject): void;
  /** A Namespace was added, updated (its binding may have changed) or deleted. */
  onNamespace(namespace: KubernetesObject): void;
}

/**
 * Informers (list + watch with the library's ListWatch, which resumes from the last resourceVersion and
 * re-lists on 410 Gone) over every source of the kinds and of the owned Secrets; not yet started.
 */
export function makeInformers(
  kubeConfig: KubeConfig,
  custom: CustomObjectsApi,
  core: CoreV1Api,
  namespaces: readonly string[],
  handlers: InformerHandlers,
): Informers {
  const informers: Informers = new Map();
  for (const resource of handlers.kinds) {
    const onResource = (object: KubernetesObject) => handlers.onResource(resource.plural, object);
    informers.set(
      resource.plural,
      resourceSources(custom, namespaces, resource).map(({ path, list }) => {
        const informer = new ListWatch<KubernetesObject>(path, new Watch(kubeConfig), list, false);
        informer.on('add', onResource);
        informer.on('update', onResource);
        return informer;
      }),
    );
  }
  informers.set(
    'secrets',
    ownedSecretSources(core, namespaces).map(({ path, list }) => {
      const informer = new ListWatch<KubernetesObject>(path, new Watch(kubeConfig), list, false, OWNED_SECRETS);
      for (const event of ['add', 'update', 'delete'] as const) informer.on(event, (secret) => handlers.onOwnedSecret(secret));
      return informer;
    }),
  );
  informers.set(
    NAMESPACES,
    namespaceSources(core, namespaces).map(({ path, list, fieldSelector }) => {
      const informer = new ListWatch<KubernetesObject>(path, new Watch(kubeConfig), list, false, undefined, fieldSelector);
      for (const event of ['add', 'update', 'delete'] as const) informer.on(event, (namespace) => handlers.onNamespace(namespace));
      return informer;
    }),
  );
  return informers;
}
