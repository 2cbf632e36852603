import { PatchStrategy, setHeaderOptions, type CoreV1Api, type CustomObjectsApi, type V1Secret } from '@kubernetes/client-node';
import type { ApiKeyService } from '../auth/apiKeyService.ts';
import type { ApiKeyRecord } from '../auth/apiKeyStore.ts';
import type { Actor } from '../events/adminEvent.ts';
import { parseCidr } from '../platform/cidr.ts';
import type { Logger } from '../platform/logger.ts';
import { setCondition, type Condition } from './conditions.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { API_KEY, GROUP, VERSION, apiKeySpecSchema, type ApiKeySpec } from './resources.ts';

/** Holds deletion of an ApiKey until its key is revoked. */
export const API_KEY_FINALIZER = 'audittrail.dev/revoke-key';
/** Keys of the Secret the controller writes for an ApiKey. */
export const SECRET_KEY_FIELD = 'apiKey';
export const SECRET_LOOKUP_FIELD = 'lookupId';

export interface ApiKeyObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; uid: string; generation?: number; resourceVersion?: string; finalizers?: string[]; deletionTimestamp?: unknown };
  spec: ApiKeySpec;
  status?: { lookupId?: string; state?: 'Active' | 'Revoked'; observedGeneration?: number; conditions?: Condition[] };
}

export interface ApiKeyReconcilerOptions {
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  readonly keys: ApiKeyService;
  readonly events: EventRecorder;
  readonly log: Logger;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * Brings one ApiKey resource and the database together: mints the key once (only its hash is stored; the
 * key goes to the Secret named in the spec, owned by the resource), applies scope, CIDR and description
 * changes in place, revokes on `revoked: true` or deletion (finalizer), and reports status. Only keys whose
 * managed_by names this very resource (namespace, name and uid) are ever touched.
 */
export class ApiKeyReconciler {
  private readonly options: ApiKeyReconcilerOptions;

  constructor(options: ApiKeyReconcilerOptions) {
    this.options = options;
  }

  async reconcile(object: ApiKeyObject): Promise<void> {
    const { metadata } = object;
    const managedBy = `kubernetes:${metadata.namespace}/${metadata.name}/${metadata.uid}`;
    const actor: Actor = { userId: `kubernetes:${metadata.namespace}/${metadata.name}`, userRole: 'controller' };
    const log = this.options.log.child({ apikey: `${metadata.namespace}/${metadata.name}` });

    if (metadata.deletionTimestamp) {
      const record = await this.options.keys.findManaged(managedBy);
      if (record && !record.revokedAt) {
        await this.options.keys.revoke(record.lookupId, actor);
        log.info({ lookup_id: record.lookupId }, 'key revoked: ApiKey deleted');
      }
      if (metadata.finalizers?.includes(API_KEY_FINALIZER)) {
        await this.patch(object, { metadata: { finalizers: metadata.finalizers.filter((finalizer) => finalizer !== API_KEY_FINALIZER), resourceVersion: metadata.resourceVersion } });
      }
      return;
    }
    if (!metadata.finalizers?.includes(API_KEY_FINALIZER)) {
      await this.patch(object, { metadata: { finalizers: [...(metadata.finalizers ?? []), API_KEY_FINALIZER], resourceVersion: metadata.resourceVersion } });
    }

    const parsed = apiKeySpecSchema.safeParse(object.spec);
    if (!parsed.success) {
      const message = parsed.error.issues.map((issue) => `spec.${issue.path.join('.')}: ${issue.message}`).join('; ');
      await this.setStatus(object, { ready: false, reason: 'InvalidSpec', message });
      return;
    }
    const spec = parsed.data;
    let record = await this.options.keys.findManaged(managedBy);
    if (!record && spec.revoked) {
      await this.setStatus(object, { ready: false, reason: 'Revoked', message: 'The key was revoked before it was minted.', state: 'Revoked' });
      return;
    }
    if (!record || (!record.revokedAt && !(await this.secretHolds(object, spec, record)))) {
      // Never minted, or minted but the Secret never received it (a crash in between): that key is unknown
      // to anyone, so it is revoked and a new one minted.
      if (record) await this.options.keys.revoke(record.lookupId, actor);
      record = await this.mint(object, spec, managedBy, actor);
    }
    if (spec.revoked && !record.revokedAt) {
      record = await this.options.keys.revoke(record.lookupId, actor);
      await this.options.events.record(this.involved(object), 'Normal', 'KeyRevoked', `Key ${record.lookupId} revoked (spec.revoked).`);
    }
    if (!record.revokedAt && grantsChanged(record, spec)) {
      record = await this.options.keys.updateGrants(
        record.lookupId,
        { tenantId: spec.tenantId, scopes: spec.scopes, allowedCidrs: spec.allowedCidrs ?? [], description: spec.description ?? '' },
        actor,
      );
      await this.options.events.record(this.involved(object), 'Normal', 'GrantsUpdated', `Scopes, allow-list or description of key ${record.lookupId} updated.`);
    }
    await this.setStatus(object, record.revokedAt
      ? { ready: false, reason: 'Revoked', message: `Key ${record.lookupId} is revoked.`, state: 'Revoked', lookupId: record.lookupId }
      : { ready: true, reason: 'Active', message: `Key ${record.lookupId} is active.`, state: 'Active', lookupId: record.lookupId });
  }

  private async mint(object: ApiKeyObject, spec: ApiKeySpec, managedBy: string, actor: Actor): Promise<ApiKeyRecord> {
    const minted = await this.options.keys.mint(
      { tenantId: spec.tenantId, scopes: spec.scopes, allowedCidrs: spec.allowedCidrs ?? [], description: spec.description ?? '' },
      actor,
      managedBy,
    );
    const secret: V1Secret = {
      metadata: {
        name: spec.secretName,
        namespace: object.metadata.namespace,
        labels: { 'app.kubernetes.io/managed-by': 'audit-trail-controller' },
        ownerReferences: [{ apiVersion: object.apiVersion, kind: API_KEY.kind, name: object.metadata.name, uid: object.metadata.uid, controller: true, blockOwnerDeletion: true }],
      },
      type: 'Opaque',
      stringData: { [SECRET_KEY_FIELD]: minted.key, [SECRET_LOOKUP_FIELD]: minted.record.lookupId },
    };
    const existing = await this.readSecret(object.metadata.namespace, spec.secretName);
    if (existing && !ownedBy(existing, object.metadata.uid)) {
      await this.options.keys.revoke(minted.record.lookupId, actor);
      throw new Error(`Secret ${spec.secretName} exists and is not owned by this ApiKey`);
    }
    if (existing) {
      await this.options.core.replaceNamespacedSecret({ name: spec.secretName, namespace: object.metadata.namespace, body: { ...secret, metadata: { ...secret.metadata, resourceVersion: existing.metadata?.resourceVersion } } });
    } else {
      await this.options.core.createNamespacedSecret({ namespace: object.metadata.namespace, body: secret });
    }
    await this.options.events.record(this.involved(object), 'Normal', 'KeyMinted', `Key ${minted.record.lookupId} minted and written to Secret ${spec.secretName}.`);
    return minted.record;
  }

  private async secretHolds(object: ApiKeyObject, spec: ApiKeySpec, record: ApiKeyRecord): Promise<boolean> {
    const secret = await this.readSecret(object.metadata.namespace, spec.secretName);
    const lookupId = secret?.data?.[SECRET_LOOKUP_FIELD];
    return lookupId !== undefined && Buffer.from(lookupId, 'base64').toString('utf8') === record.lookupId && ownedBy(secret!, object.metadata.uid);
  }

  private async readSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await this.options.core.readNamespacedSecret({ name, namespace });
    } catch (error) {
      if ((error as { code?: number }).code === 404) return undefined;
      throw error;
    }
  }

  private async setStatus(
    object: ApiKeyObject,
    outcome: { ready: boolean; reason: string; message: string; state?: 'Active' | 'Revoked'; lookupId?: string },
  ): Promise<void> {
    const generation = object.metadata.generation;
    const status = {
      ...(outcome.lookupId ? { lookupId: outcome.lookupId } : {}),
      ...(outcome.state ? { state: outcome.state } : {}),
      observedGeneration: generation,
      conditions: setCondition(object.status?.conditions, { type: 'Ready', status: outcome.ready ? 'True' : 'False', reason: outcome.reason, message: outcome.message, observedGeneration: generation }),
    };
    if (JSON.stringify(status) === JSON.stringify({ ...object.status })) return;
    if (outcome.reason === 'InvalidSpec' && object.status?.conditions?.find((condition) => condition.type === 'Ready')?.reason !== 'InvalidSpec') {
      await this.options.events.record(this.involved(object), 'Warning', 'InvalidSpec', outcome.message);
    }
    await this.options.custom.patchNamespacedCustomObjectStatus(
      { group: GROUP, version: VERSION, namespace: object.metadata.namespace, plural: API_KEY.plural, name: object.metadata.name, body: { status } },
      mergePatch,
    );
  }

  private async patch(object: ApiKeyObject, body: unknown): Promise<void> {
    await this.options.custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace: object.metadata.namespace, plural: API_KEY.plural, name: object.metadata.name, body },
      mergePatch,
    );
  }

  private involved(object: ApiKeyObject) {
    return { apiVersion: object.apiVersion, kind: API_KEY.kind, name: object.metadata.name, namespace: object.metadata.namespace, uid: object.metadata.uid };
  }
}

function ownedBy(secret: V1Secret, uid: string): boolean {
  return secret.metadata?.ownerReferences?.some((reference) => reference.uid === uid) ?? false;
}

/** Compared as stored: CIDRs normalised (a bare address is a /32 or /128), order irrelevant. */
function grantsChanged(record: ApiKeyRecord, spec: ApiKeySpec): boolean {
  const sorted = (values: readonly string[]) => JSON.stringify([...values].sort());
  const normalised = (cidr: string) => {
    try {
      return parseCidr(cidr).text;
    } catch {
      return cidr; // refused by updateGrants with a clear error
    }
  };
  return (
    sorted(record.scopes) !== sorted(spec.scopes) ||
    sorted(record.allowedCidrs) !== sorted((spec.allowedCidrs ?? []).map(normalised)) ||
    record.description !== (spec.description ?? '')
  );
}
