import type { ApiKeyService } from '../auth/apiKeyService.ts';
import type { ApiKeyRecord } from '../auth/apiKeyStore.ts';
import type { Actor } from '../events/adminEvent.ts';
import { parseCidr } from '../platform/cidr.ts';
import { checkInput } from '../platform/inputValidation.ts';
import type { Logger } from '../platform/logger.ts';
import type { Health } from './conditions.ts';
import type { DeploymentGuard } from './deploymentGuard.ts';
import { reportHealth } from './healthReport.ts';
import type { EventRecorder } from './kubeEvents.ts';
import {
  involvedObject,
  managedByOf,
  pendingRequest,
  secretConflictMessage,
  type CustomResource,
  type KubeResources,
  type SecretState,
} from './kubeResources.ts';
import { API_KEY, ROTATE_ANNOTATION, apiKeySpecSchema, type ApiKeySpec } from './resources.ts';

/** Holds deletion of an ApiKey until its key is revoked. */
export const API_KEY_FINALIZER = 'audittrail.dev/revoke-key';
/** Keys of the Secret the controller writes for an ApiKey. */
const SECRET_KEY_FIELD = 'apiKey';
const SECRET_LOOKUP_FIELD = 'lookupId';

type Status = { lookupId?: string; state?: 'Active' | 'Revoked'; rotateRequest?: string };
export type ApiKeyObject = CustomResource<ApiKeySpec, Status>;

export interface ApiKeyReconcilerOptions {
  readonly resources: KubeResources;
  readonly keys: ApiKeyService;
  readonly events: EventRecorder;
  readonly guard: DeploymentGuard;
  readonly log: Logger;
}

/**
 * Brings one ApiKey resource and the database together: mints the key once (only its hash is stored; the
 * key goes to the Secret named in the spec, owned by the resource), applies scope, CIDR and description
 * changes in place, revokes on `revoked: true` or deletion (finalizer), mints a new key when the rotate
 * annotation asks for one, and reports status. Only keys whose managed_by names this very resource
 * (namespace, name and uid) are ever touched, and nothing is written to the database while the Secret's
 * name is taken by someone else.
 */
export class ApiKeyReconciler {
  private readonly options: ApiKeyReconcilerOptions;

  constructor(options: ApiKeyReconcilerOptions) {
    this.options = options;
  }

  async reconcile(informed: ApiKeyObject): Promise<void> {
    const { resources, keys, guard } = this.options;
    const cached = resources.freshest(informed);
    if (!(await guard.mayAct(cached))) return;
    const managedBy = managedByOf(cached);
    const actor: Actor = { userId: `kubernetes:${cached.metadata.namespace}/${cached.metadata.name}`, userRole: 'controller' };

    if (cached.metadata.deletionTimestamp) {
      if (!cached.metadata.finalizers?.includes(API_KEY_FINALIZER)) return;
      const record = await keys.findManaged(managedBy);
      if (record && !record.revokedAt) await keys.revoke(record.lookupId, actor);
      await resources.removeFinalizer(API_KEY.plural, cached, API_KEY_FINALIZER);
      return;
    }
    const object = await guard.claim(API_KEY.plural, cached, API_KEY_FINALIZER);

    let record = await keys.findManaged(managedBy);
    // The same gate as every API input: a spec the database could not store is invalid, not an error loop.
    const parsed = checkInput(apiKeySpecSchema, object.spec, 'spec');
    if (!parsed.success) {
      const message = parsed.error.details.map((detail) => `${detail.field}: ${detail.message}`).join('; ');
      return this.report(object, record, { state: 'Stalled', reason: 'InvalidSpec', message });
    }
    const spec = parsed.data;

    if (spec.revoked) {
      // Revoked on purpose: a settled state, whatever became of the Secret.
      if (record && !record.revokedAt) {
        record = await keys.revoke(record.lookupId, actor);
        await this.options.events.record(involvedObject(object), 'Normal', 'KeyRevoked', `Key ${record.lookupId} revoked (spec.revoked).`);
      }
      const message = record ? `Key ${record.lookupId} is revoked (spec.revoked).` : 'The key was revoked before it was minted.';
      return this.report(object, record, { state: 'Ready', reason: 'Revoked', message });
    }

    let rotateRequest = object.status?.rotateRequest;
    const rotation = pendingRequest(object, ROTATE_ANNOTATION, rotateRequest);
    // Ownership first: while the Secret's name is taken, nothing is minted, revoked or rewritten. The
    // informer's copy will do when it shows the key delivered and nothing is asked (a resync).
    const current = record;
    const secret = await resources.secretState(
      object,
      spec.secretName,
      (state) => rotation === undefined && current !== undefined && delivers(state, current),
    );
    if (secret.state === 'foreign') {
      return this.report(object, record, {
        state: 'Stalled',
        reason: 'SecretConflict',
        message: secretConflictMessage(object, spec.secretName),
      });
    }
    if (!record) {
      record = await this.mint(object, spec, managedBy, actor);
      // An annotation present before the first key asks for nothing more.
      return this.report(object, record, active(record), object.metadata.annotations?.[ROTATE_ANNOTATION]);
    }

    const delivered = delivers(secret, record);
    if (rotation !== undefined) {
      if (!(await resources.isCurrent(API_KEY.plural, object))) return;
      record = await this.rotate(object, spec, record, managedBy, actor);
      rotateRequest = rotation;
    } else if (!delivered && !record.revokedAt) {
      if (object.status?.lookupId !== record.lookupId) {
        // Minted, but neither the Secret nor status ever showed it (a crash in between): that key is known
        // to no one, so it is revoked and a new one minted.
        if (!(await resources.isCurrent(API_KEY.plural, object))) return;
        record = await this.rotate(object, spec, record, managedBy, actor);
      } else {
        // The key was delivered and someone deleted or changed its Secret: the key keeps working for
        // whoever holds it; a new one only when asked for.
        const what =
          secret.state === 'missing'
            ? `Secret ${spec.secretName} was deleted`
            : `Secret ${spec.secretName} no longer holds key ${record.lookupId}`;
        return this.report(object, record, {
          state: 'Stalled',
          reason: 'SecretMissing',
          message: `${what}; the key still works. To mint a new key into a new Secret, set annotation ${ROTATE_ANNOTATION} to a new value.`,
        });
      }
    }

    if (record.revokedAt) {
      return this.report(
        object,
        record,
        {
          state: 'Stalled',
          reason: 'RevokedOutsideKubernetes',
          message: `Key ${record.lookupId} was revoked outside Kubernetes (audit-trail keys revoke). Set spec.revoked: true to accept that, or annotation ${ROTATE_ANNOTATION} to a new value for a new key.`,
        },
        rotateRequest,
      );
    }
    if (grantsChanged(record, spec)) {
      record = await keys.updateGrants(record.lookupId, grantsOf(spec), actor);
      await this.options.events.record(
        involvedObject(object),
        'Normal',
        'GrantsUpdated',
        `Scopes, allow-list or description of key ${record.lookupId} updated.`,
      );
    }
    return this.report(object, record, active(record), rotateRequest);
  }

  /** A new key in the Secret, then the old one revoked: whoever reads the Secret gets a working key. */
  private async rotate(
    object: ApiKeyObject,
    spec: ApiKeySpec,
    current: ApiKeyRecord,
    managedBy: string,
    actor: Actor,
  ): Promise<ApiKeyRecord> {
    const replacement = await this.mint(object, spec, managedBy, actor);
    if (!current.revokedAt) await this.options.keys.revoke(current.lookupId, actor);
    await this.options.events.record(
      involvedObject(object),
      'Normal',
      'KeyRotated',
      `Key ${current.lookupId} replaced by ${replacement.lookupId}${current.revokedAt ? '' : ' and revoked'}.`,
    );
    return replacement;
  }

  private async mint(object: ApiKeyObject, spec: ApiKeySpec, managedBy: string, actor: Actor): Promise<ApiKeyRecord> {
    const minted = await this.options.keys.mint(grantsOf(spec), actor, managedBy);
    try {
      await this.options.resources.writeOwnedSecret(object, spec.secretName, {
        [SECRET_KEY_FIELD]: minted.key,
        [SECRET_LOOKUP_FIELD]: minted.record.lookupId,
      });
    } catch (error) {
      // The key reached no one: do not leave it valid.
      await this.options.keys.revoke(minted.record.lookupId, actor);
      throw error;
    }
    await this.options.events.record(
      involvedObject(object),
      'Normal',
      'KeyMinted',
      `Key ${minted.record.lookupId} minted and written to Secret ${spec.secretName}.`,
    );
    return minted.record;
  }

  private report(
    object: ApiKeyObject,
    record: ApiKeyRecord | undefined,
    health: Health,
    rotateRequest = object.status?.rotateRequest,
  ): Promise<void> {
    const fields = {
      lookupId: record?.lookupId,
      state: record ? (record.revokedAt ? 'Revoked' : 'Active') : health.reason === 'Revoked' ? 'Revoked' : undefined,
      rotateRequest,
    };
    return reportHealth(this.options.resources, this.options.events, API_KEY.plural, object, fields, health);
  }
}

/** Whether the Secret is this resource's own and holds the key of `record`. */
function delivers(secret: SecretState, record: ApiKeyRecord): boolean {
  return secret.state === 'owned' && secret.values[SECRET_LOOKUP_FIELD] === record.lookupId;
}

function active(record: ApiKeyRecord): Health {
  return { state: 'Ready', reason: 'Active', message: `Key ${record.lookupId} is active.` };
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
