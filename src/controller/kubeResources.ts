import { PatchStrategy, setHeaderOptions, type CoreV1Api, type CustomObjectsApi, type V1Secret } from '@kubernetes/client-node';
import type { Condition } from './conditions.ts';
import type { InvolvedObject } from './kubeEvents.ts';
import { mergePatchDiff } from './mergePatchDiff.ts';
import { DEPLOYMENT_ANNOTATION, GROUP, VERSION } from './resources.ts';

/** The parts of a custom resource the reconcilers read and write. */
export interface CustomResource<Spec, Status> {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    generation?: number;
    resourceVersion?: string;
    finalizers?: string[];
    deletionTimestamp?: unknown;
    annotations?: Record<string, string>;
  };
  spec: Spec;
  status?: Status & { observedGeneration?: number; conditions?: Condition[] };
}

/** Any custom resource, as the parts shared by both kinds see it. */
export type AnyResource = CustomResource<unknown, Record<string, unknown>>;

/** The label on every Secret the controller writes; its Secret informer selects on it. */
export const OWNED_SECRET_LABEL = 'app.kubernetes.io/managed-by';
export const OWNED_SECRET_LABEL_VALUE = 'audit-trail-controller';

/** What the Secret a resource names is, seen from that resource. */
export type SecretState =
  | { readonly state: 'missing' }
  | { readonly state: 'foreign' }
  | { readonly state: 'owned'; readonly values: Readonly<Record<string, string>> };

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** Objects whose last write is remembered, and replaced versions remembered per object: bounds, not limits. */
const REMEMBERED_OBJECTS = 4096;
const REMEMBERED_VERSIONS = 16;

/** Thrown when the Secret a resource names exists but belongs to something else. */
export class SecretConflictError extends Error {
  override name = 'SecretConflictError';
}

/** The Secret informer's copy of a Secret (it holds only those labelled as the controller's own), if it has one. */
export type CachedSecret = (namespace: string, name: string) => V1Secret | undefined;

/** Kubernetes writes shared by the reconcilers: the deployment stamp, finalizers, status, and the Secrets they own. */
export class KubeResources {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly cachedSecret: CachedSecret;
  /** Per uid: the object as our last write left it, and the resourceVersions that write (and earlier ones) replaced. */
  private readonly written = new Map<string, { latest: AnyResource; replaced: string[] }>();

  constructor(custom: CustomObjectsApi, core: CoreV1Api, cachedSecret: CachedSecret = () => undefined) {
    this.custom = custom;
    this.core = core;
    this.cachedSecret = cachedSecret;
  }

  /**
   * The newer of the informer's copy and the object as this controller's own last write left it. The
   * informer's copy lags behind our writes (the watch event is on its way): reconciling from it would
   * repeat the claim (a 409) or rewrite a status already written. A version our write replaced is known to
   * be stale; any other version (someone else's later write) is taken as it is.
   */
  freshest<T extends AnyResource>(object: T): T {
    const entry = this.written.get(object.metadata.uid);
    return entry?.replaced.includes(object.metadata.resourceVersion ?? '') ? (entry.latest as T) : object;
  }

  private remember(before: AnyResource, after: AnyResource): void {
    const previous = this.written.get(before.metadata.uid);
    const replaced = [
      ...(previous?.replaced ?? []),
      ...(previous ? [previous.latest.metadata.resourceVersion ?? ''] : []),
      before.metadata.resourceVersion ?? '',
    ];
    this.written.delete(before.metadata.uid);
    this.written.set(before.metadata.uid, {
      latest: after,
      replaced: [...new Set(replaced)].filter((version) => version !== after.metadata.resourceVersion).slice(-REMEMBERED_VERSIONS),
    });
    if (this.written.size > REMEMBERED_OBJECTS) this.written.delete(this.written.keys().next().value!);
  }

  /**
   * Stamps the resource with this deployment's id and adds the finalizer, in one write guarded by the
   * object's resourceVersion: of two controllers claiming it at once, one gets 409 and, retrying, finds
   * the other's stamp. Returns the object as stored (unchanged when already claimed).
   */
  async claim<T extends AnyResource>(plural: string, object: T, deploymentId: string, finalizer: string): Promise<T> {
    const finalizers = object.metadata.finalizers ?? [];
    if (object.metadata.annotations?.[DEPLOYMENT_ANNOTATION] === deploymentId && finalizers.includes(finalizer)) return object;
    const claimed = (await this.custom.patchNamespacedCustomObject(
      {
        ...this.address(plural, object),
        body: {
          metadata: {
            annotations: { [DEPLOYMENT_ANNOTATION]: deploymentId },
            finalizers: finalizers.includes(finalizer) ? finalizers : [...finalizers, finalizer],
            resourceVersion: object.metadata.resourceVersion,
          },
        },
      },
      mergePatch,
    )) as T;
    this.remember(object, claimed);
    return claimed;
  }

  /**
   * Removes a finalizer, guarded by the object's resourceVersion (409 if it moved meanwhile). A 404 means the
   * object is gone already (someone removed the finalizers by hand, or another leader finished first): what
   * the finalizer held it for is done, so that is success, not a failure to retry.
   */
  async removeFinalizer(plural: string, object: AnyResource, finalizer: string): Promise<void> {
    const current = object.metadata.finalizers ?? [];
    if (!current.includes(finalizer)) return;
    try {
      await this.custom.patchNamespacedCustomObject(
        {
          ...this.address(plural, object),
          body: {
            metadata: { finalizers: current.filter((item) => item !== finalizer), resourceVersion: object.metadata.resourceVersion },
          },
        },
        mergePatch,
      );
    } catch (error) {
      if ((error as { code?: number }).code !== 404) throw error;
    }
  }

  /**
   * Writes status only when it differs from what the object shows, compared as values (the API server
   * returns custom resources with sorted keys), as a merge patch naming removed fields as null.
   */
  async setStatus(plural: string, object: AnyResource, status: Record<string, unknown>): Promise<boolean> {
    const patch = mergePatchDiff(object.status, status);
    if (patch === undefined) return false;
    this.remember(
      object,
      (await this.custom.patchNamespacedCustomObjectStatus(
        { ...this.address(plural, object), body: { status: patch } },
        mergePatch,
      )) as AnyResource,
    );
    return true;
  }

  /**
   * Whether the object is still the version stored, read from the API server itself: the informer's copy
   * may lag behind our own last write, so this is asked before anything that must happen only once (a
   * rotation). When it is not, the watch delivers the newer version and the object is reconciled again.
   */
  async isCurrent(plural: string, object: AnyResource): Promise<boolean> {
    try {
      const stored = (await this.custom.getNamespacedCustomObject(this.address(plural, object))) as AnyResource;
      return stored.metadata.uid === object.metadata.uid && stored.metadata.resourceVersion === object.metadata.resourceVersion;
    } catch (error) {
      if ((error as { code?: number }).code === 404) return false;
      throw error;
    }
  }

  async readSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await this.core.readNamespacedSecret({ name, namespace });
    } catch (error) {
      if ((error as { code?: number }).code === 404) return undefined;
      throw error;
    }
  }

  /**
   * The Secret `name` as `owner` sees it: missing, someone else's, or its own with its decoded values.
   * Reading it from the API server at every reconcile made a resync cost one GET per resource (33 a second
   * for 1,000 resources every 30 s), so the Secret informer's copy is used when `settled` accepts it: when
   * it agrees with the database, nothing is to be done from it. A copy that lags behind a change only makes
   * the resource look settled until that change's watch event, which queues it again; any copy that would
   * lead to an action (a lag behind our own write included) fails `settled` and is read afresh.
   */
  async secretState(owner: AnyResource, name: string, settled?: (state: SecretState) => boolean): Promise<SecretState> {
    const cached = settled && this.cachedSecret(owner.metadata.namespace, name);
    if (cached) {
      const state = secretStateOf(cached, owner);
      if (settled(state)) return state;
    }
    return secretStateOf(await this.readSecret(owner.metadata.namespace, name), owner);
  }

  /** Creates or replaces a Secret owned by `owner` (garbage-collected with it); refuses someone else's. */
  async writeOwnedSecret(owner: AnyResource, name: string, data: Record<string, string>): Promise<void> {
    const secret: V1Secret = {
      metadata: {
        name,
        namespace: owner.metadata.namespace,
        labels: { [OWNED_SECRET_LABEL]: OWNED_SECRET_LABEL_VALUE },
        ownerReferences: [
          {
            apiVersion: owner.apiVersion,
            kind: owner.kind,
            name: owner.metadata.name,
            uid: owner.metadata.uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      type: 'Opaque',
      stringData: data,
    };
    const existing = await this.readSecret(owner.metadata.namespace, name);
    if (existing && !ownedBy(existing, owner.metadata.uid)) throw new SecretConflictError(secretConflictMessage(owner, name));
    if (existing) {
      await this.core.replaceNamespacedSecret({
        name,
        namespace: owner.metadata.namespace,
        body: { ...secret, metadata: { ...secret.metadata, resourceVersion: existing.metadata?.resourceVersion } },
      });
    } else {
      await this.core.createNamespacedSecret({ namespace: owner.metadata.namespace, body: secret });
    }
  }

  private address(plural: string, object: AnyResource) {
    return { group: GROUP, version: VERSION, namespace: object.metadata.namespace, plural, name: object.metadata.name };
  }
}

export function secretConflictMessage(owner: AnyResource, name: string): string {
  return `Secret ${name} exists and is not owned by this ${owner.kind}; nothing was written. Delete that Secret (the controller retries by itself), or re-create this ${owner.kind} with another secretName.`;
}

export function involvedObject(object: AnyResource): InvolvedObject {
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    name: object.metadata.name,
    namespace: object.metadata.namespace,
    uid: object.metadata.uid,
  };
}

/** Who owns rows on behalf of a resource: namespace, name and uid, so a re-created namesake owns nothing. */
export function managedByOf(object: AnyResource): string {
  return `kubernetes:${object.metadata.namespace}/${object.metadata.name}/${object.metadata.uid}`;
}

/** The annotation's value when it asks for something not yet done (it differs from the value handled last). */
export function pendingRequest(object: AnyResource, annotation: string, handled: string | undefined): string | undefined {
  const requested = object.metadata.annotations?.[annotation];
  return requested !== undefined && requested !== handled ? requested : undefined;
}

function secretStateOf(secret: V1Secret | undefined, owner: AnyResource): SecretState {
  if (!secret) return { state: 'missing' };
  if (!ownedBy(secret, owner.metadata.uid)) return { state: 'foreign' };
  const values = Object.fromEntries(
    Object.entries(secret.data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')]),
  );
  return { state: 'owned', values };
}

function ownedBy(secret: V1Secret, uid: string): boolean {
  return secret.metadata?.ownerReferences?.some((reference) => reference.uid === uid) ?? false;
}
