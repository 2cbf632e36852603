import type { ApiKeyService } from '../auth/apiKeyService.ts';
import type { ApiKeyRecord } from '../auth/apiKeyStore.ts';
import type { Actor } from '../events/adminEvent.ts';
import { parseCidr } from '../platform/cidr.ts';
import type { Logger } from '../platform/logger.ts';
import { setCondition } from './conditions.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { SecretConflictError, involvedObject, managedByOf, type CustomResource, type KubeResources } from './kubeResources.ts';
import { API_KEY, apiKeySpecSchema, type ApiKeySpec } from './resources.ts';

/** Holds deletion of an ApiKey until its key is revoked. */
export const API_KEY_FINALIZER = 'audittrail.dev/revoke-key';
/** Keys of the Secret the controller writes for an ApiKey. */
export const SECRET_KEY_FIELD = 'apiKey';
export const SECRET_LOOKUP_FIELD = 'lookupId';

export type ApiKeyObject = CustomResource<ApiKeySpec, { lookupId?: string; state?: 'Active' | 'Revoked' }>;

export interface ApiKeyReconcilerOptions {
  readonly resources: KubeResources;
  readonly keys: ApiKeyService;
  readonly events: EventRecorder;
  readonly log: Logger;
}

interface Outcome {
  readonly ready: boolean;
  readonly reason: string;
  readonly message: string;
  readonly state?: 'Active' | 'Revoked';
  readonly lookupId?: string;
}

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
    const { resources, keys } = this.options;
    const managedBy = managedByOf(object);
    const actor: Actor = { userId: `kubernetes:${object.metadata.namespace}/${object.metadata.name}`, userRole: 'controller' };

    if (object.metadata.deletionTimestamp) {
      const record = await keys.findManaged(managedBy);
      if (record && !record.revokedAt) await keys.revoke(record.lookupId, actor);
      await resources.setFinalizer(API_KEY.plural, object, API_KEY_FINALIZER, false);
      return;
    }
    await resources.setFinalizer(API_KEY.plural, object, API_KEY_FINALIZER, true);

    const parsed = apiKeySpecSchema.safeParse(object.spec);
    if (!parsed.success) {
      const message = parsed.error.issues.map((issue) => `spec.${issue.path.join('.')}: ${issue.message}`).join('; ');
      await this.report(object, { ready: false, reason: 'InvalidSpec', message });
      return;
    }
    const spec = parsed.data;
    let record = await keys.findManaged(managedBy);
    if (!record && spec.revoked) {
      await this.report(object, { ready: false, reason: 'Revoked', message: 'The key was revoked before it was minted.', state: 'Revoked' });
      return;
    }
    const secretLookupId = record && (await resources.ownedSecretValue(object, spec.secretName, SECRET_LOOKUP_FIELD));
    if (!record || (!record.revokedAt && secretLookupId !== record.lookupId)) {
      // Never minted, or minted but the Secret never received it (a crash in between): that key is known
      // to no one, so it is revoked and a new one minted.
      if (record) await keys.revoke(record.lookupId, actor);
      try {
        record = await this.mint(object, spec, managedBy, actor);
      } catch (error) {
        if (!(error instanceof SecretConflictError)) throw error;
        await this.report(object, { ready: false, reason: 'SecretConflict', message: error.message });
        return;
      }
    }
    if (spec.revoked && !record.revokedAt) {
      record = await keys.revoke(record.lookupId, actor);
      await this.options.events.record(involvedObject(object), 'Normal', 'KeyRevoked', `Key ${record.lookupId} revoked (spec.revoked).`);
    }
    if (!record.revokedAt && grantsChanged(record, spec)) {
      record = await keys.updateGrants(record.lookupId, grantsOf(spec), actor);
      await this.options.events.record(involvedObject(object), 'Normal', 'GrantsUpdated', `Scopes, allow-list or description of key ${record.lookupId} updated.`);
    }
    await this.report(
      object,
      record.revokedAt
        ? { ready: false, reason: 'Revoked', message: `Key ${record.lookupId} is revoked.`, state: 'Revoked', lookupId: record.lookupId }
        : { ready: true, reason: 'Active', message: `Key ${record.lookupId} is active.`, state: 'Active', lookupId: record.lookupId },
    );
  }

  private async mint(object: ApiKeyObject, spec: ApiKeySpec, managedBy: string, actor: Actor): Promise<ApiKeyRecord> {
    const minted = await this.options.keys.mint(grantsOf(spec), actor, managedBy);
    try {
      await this.options.resources.writeOwnedSecret(object, spec.secretName, { [SECRET_KEY_FIELD]: minted.key, [SECRET_LOOKUP_FIELD]: minted.record.lookupId });
    } catch (error) {
      // The key reached no one: do not leave it valid.
      await this.options.keys.revoke(minted.record.lookupId, actor);
      throw error;
    }
    await this.options.events.record(involvedObject(object), 'Normal', 'KeyMinted', `Key ${minted.record.lookupId} minted and written to Secret ${spec.secretName}.`);
    return minted.record;
  }

  private async report(object: ApiKeyObject, outcome: Outcome): Promise<void> {
    const generation = object.metadata.generation;
    const status = {
      ...(outcome.lookupId ? { lookupId: outcome.lookupId } : {}),
      ...(outcome.state ? { state: outcome.state } : {}),
      observedGeneration: generation,
      conditions: setCondition(object.status?.conditions, {
        type: 'Ready',
        status: outcome.ready ? 'True' : 'False',
        reason: outcome.reason,
        message: outcome.message,
        observedGeneration: generation,
      }),
    };
    const changed = await this.options.resources.setStatus(API_KEY.plural, object, status);
    const wasReason = object.status?.conditions?.find((condition) => condition.type === 'Ready')?.reason;
    if (changed && !outcome.ready && outcome.reason !== 'Revoked' && wasReason !== outcome.reason) {
      await this.options.events.record(involvedObject(object), 'Warning', outcome.reason, outcome.message);
    }
  }
}

function grantsOf(spec: ApiKeySpec) {
  return { tenantId: spec.tenantId, scopes: spec.scopes, allowedCidrs: spec.allowedCidrs ?? [], description: spec.description ?? '' };
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
