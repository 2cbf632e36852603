import { PatchStrategy, setHeaderOptions, type CoreV1Api, type CustomObjectsApi, type V1Secret } from '@kubernetes/client-node';
import type { Condition } from './conditions.ts';
import type { InvolvedObject } from './kubeEvents.ts';
import { GROUP, VERSION } from './resources.ts';

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

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Thrown when the Secret a resource names exists but belongs to something else. */
export class SecretConflictError extends Error {
  override name = 'SecretConflictError';
}

/** Kubernetes writes shared by the reconcilers: finalizers, status, and the Secrets they own. */
export class KubeResources {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;

  constructor(custom: CustomObjectsApi, core: CoreV1Api) {
    this.custom = custom;
    this.core = core;
  }

  /** Adds or removes a finalizer, guarded by the object's resourceVersion (409 if it moved meanwhile). */
  async setFinalizer(plural: string, object: CustomResource<unknown, unknown>, finalizer: string, present: boolean): Promise<void> {
    const current = object.metadata.finalizers ?? [];
    if (current.includes(finalizer) === present) return;
    const finalizers = present ? [...current, finalizer] : current.filter((item) => item !== finalizer);
    await this.custom.patchNamespacedCustomObject(
      { ...this.address(plural, object), body: { metadata: { finalizers, resourceVersion: object.metadata.resourceVersion } } },
      mergePatch,
    );
  }

  /** Writes status when it differs from what the object shows. */
  async setStatus(plural: string, object: CustomResource<unknown, unknown>, status: Record<string, unknown>): Promise<boolean> {
    if (JSON.stringify(status) === JSON.stringify({ ...object.status })) return false;
    await this.custom.patchNamespacedCustomObjectStatus({ ...this.address(plural, object), body: { status } }, mergePatch);
    return true;
  }

  async readSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await this.core.readNamespacedSecret({ name, namespace });
    } catch (error) {
      if ((error as { code?: number }).code === 404) return undefined;
      throw error;
    }
  }

  /** The value of one key of a Secret the resource owns, or undefined. */
  async ownedSecretValue(owner: CustomResource<unknown, unknown>, name: string, key: string): Promise<string | undefined> {
    const secret = await this.readSecret(owner.metadata.namespace, name);
    const value = secret?.data?.[key];
    if (!secret || value === undefined || !ownedBy(secret, owner.metadata.uid)) return undefined;
    return Buffer.from(value, 'base64').toString('utf8');
  }

  /** Creates or replaces a Secret owned by `owner` (garbage-collected with it); refuses someone else's. */
  async writeOwnedSecret(owner: CustomResource<unknown, unknown>, name: string, data: Record<string, string>): Promise<void> {
    const secret: V1Secret = {
      metadata: {
        name,
        namespace: owner.metadata.namespace,
        labels: { 'app.kubernetes.io/managed-by': 'audit-trail-controller' },
        ownerReferences: [{ apiVersion: owner.apiVersion, kind: owner.kind, name: owner.metadata.name, uid: owner.metadata.uid, controller: true, blockOwnerDeletion: true }],
      },
      type: 'Opaque',
      stringData: data,
    };
    const existing = await this.readSecret(owner.metadata.namespace, name);
    if (existing && !ownedBy(existing, owner.metadata.uid)) throw new SecretConflictError(`Secret ${name} exists and is not owned by this ${owner.kind}`);
    if (existing) {
      await this.core.replaceNamespacedSecret({ name, namespace: owner.metadata.namespace, body: { ...secret, metadata: { ...secret.metadata, resourceVersion: existing.metadata?.resourceVersion } } });
    } else {
      await this.core.createNamespacedSecret({ namespace: owner.metadata.namespace, body: secret });
    }
  }

  private address(plural: string, object: CustomResource<unknown, unknown>) {
    return { group: GROUP, version: VERSION, namespace: object.metadata.namespace, plural, name: object.metadata.name };
  }
}

export function involvedObject(object: CustomResource<unknown, unknown>): InvolvedObject {
  return { apiVersion: object.apiVersion, kind: object.kind, name: object.metadata.name, namespace: object.metadata.namespace, uid: object.metadata.uid };
}

/** Who owns rows on behalf of a resource: namespace, name and uid, so a re-created namesake owns nothing. */
export function managedByOf(object: CustomResource<unknown, unknown>): string {
  return `kubernetes:${object.metadata.namespace}/${object.metadata.name}/${object.metadata.uid}`;
}

function ownedBy(secret: V1Secret, uid: string): boolean {
  return secret.metadata?.ownerReferences?.some((reference) => reference.uid === uid) ?? false;
}
