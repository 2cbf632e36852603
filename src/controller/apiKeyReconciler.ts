import type { ApiKeyService } from '../auth/apiKeyService.ts';
import type { ApiKeyRecord } from '../auth/apiKeyStore.ts';
import type { Actor } from '../events/adminEvent.ts';
import { checkInput } from '../platform/inputValidation.ts';
import type { Logger } from '../platform/logger.ts';
import type { Health } from './conditions.ts';
import {
  SECRET_KEY_FIELD,
  SECRET_LOOKUP_FIELD,
  activeHealth,
  decideApiKey,
  delivers,
  grantsOf,
  revokedHealth,
  settleApiKey,
} from './apiKeyDecision.ts';
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
} from './kubeResources.ts';
import { API_KEY, ROTATE_ANNOTATION, apiKeySpecSchema, type ApiKeySpec } from './resources.ts';

/** Holds deletion of an ApiKey until its key is revoked. */
export const API_KEY_FINALIZER = 'audittrail.dev/revoke-key';

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

    const rotation = pendingRequest(object, ROTATE_ANNOTATION, object.status?.rotateRequest);
    // Ownership first: while the Secret's name is taken, nothing is minted, revoked or rewritten. The
    // informer's copy will do when it shows the key delivered and nothing is asked (a resync).
    const current = record;
    const secret = spec.revoked
      ? undefined
      : await resources.secretState(
          object,
          spec.secretName,
          (state) => rotation === undefined && current !== undefined && delivers(state, current),
        );
    const step = decideApiKey({ spec, record, rotation, secret, statusLookupId: object.status?.lookupId });
    const rotateRequest = object.status?.rotateRequest;
    switch (step.kind) {
      case 'revoked':
        if (record && step.revokeFirst) {
          record = await keys.revoke(record.lookupId, actor);
          await this.options.events.record(
            involvedObject(object),
            'Normal',
            'KeyRevoked',
            `Key ${record.lookupId} revoked (spec.revoked).`,
          );
        }
        return this.report(object, record, revokedHealth(record));
      case 'secret-conflict':
        return this.report(object, record, {
          state: 'Stalled',
          reason: 'SecretConflict',
          message: secretConflictMessage(object, spec.secretName),
        });
      case 'mint':
        record = await this.mint(object, spec, managedBy, actor);
        // An annotation present before the first key asks for nothing more.
        return this.report(object, record, activeHealth(record), object.metadata.annotations?.[ROTATE_ANNOTATION]);
      case 'secret-missing':
        return this.report(object, record, step.health);
      case 'rotate':
        if (!(await resources.isCurrent(API_KEY.plural, object))) return;
        return this.settle(
          object,
          spec,
          await this.rotate(object, spec, step.record, managedBy, actor),
          actor,
          step.request ?? rotateRequest,
        );
      case 'settle':
        return this.settle(object, spec, step.record, actor, rotateRequest);
    }
  }

  /** A key where it should be: a revocation made elsewhere reported, its grants brought in line, or active. */
  private async settle(
    object: ApiKeyObject,
    spec: ApiKeySpec,
    record: ApiKeyRecord,
    actor: Actor,
    rotateRequest: string | undefined,
  ): Promise<void> {
    const settled = settleApiKey(record, spec);
    if (settled.kind === 'revoked-outside') return this.report(object, record, settled.health, rotateRequest);
    if (settled.kind === 'update-grants') {
      record = await this.options.keys.updateGrants(record.lookupId, grantsOf(spec), actor);
      await this.options.events.record(
        involvedObject(object),
        'Normal',
        'GrantsUpdated',
        `Scopes, allow-list or description of key ${record.lookupId} updated.`,
      );
    }
    return this.report(object, record, activeHealth(record), rotateRequest);
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
