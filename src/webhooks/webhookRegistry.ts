import type pg from 'pg';
import type { Actor } from '../events/adminEvent.ts';
import type { Queryable } from '../db/database.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../platform/errors.ts';
import { parseInput } from '../platform/inputValidation.ts';
import { systemClock } from '../platform/clock.ts';
import { type SealedSecrets, type SecretBox, generateWebhookId, generateWebhookSecret } from './secretBox.ts';
import { targetProblem, type TargetPolicy } from './targetGuard.ts';
import {
  WEBHOOKS_PER_TENANT,
  normaliseWebhookUrl,
  secretRotationSchema,
  webhookChangesSchema,
  webhookRegistrationSchema,
  type WebhookUrlPolicy,
} from './webhookRules.ts';
import {
  deleteEndpoint,
  disableEndpoint,
  enableEndpoint,
  findEndpoint,
  findManagedEndpoint,
  insertEndpointWithinLimit,
  lockTenantEndpoints,
  listEndpoints,
  rotateEndpointSecret,
  updateEndpoint,
} from './webhookStore.ts';
import type { WebhookEndpoint } from './webhookEndpoint.ts';
import { findEndpointSecrets } from './endpointSecretsStore.ts';
import { changedConfiguration, registeredConfiguration } from './endpointConfiguration.ts';
import { rotatedKeys } from './secretRotation.ts';
import { endpointNotice, type OperationalNotice } from './operationalEvents.ts';
import { describeEndpoint, webhookEvent } from './webhookEvents.ts';

export interface RegisteredEndpoint {
  readonly endpoint: WebhookEndpoint;
  /** Shown once to whoever registered the endpoint; only its ciphertext is stored. */
  readonly secret: string;
}

export interface RotatedSecret {
  readonly endpoint: WebhookEndpoint;
  /** The new signing secret, shown once like a registration's. */
  readonly secret: string;
  /** The replaced secret (and Ed25519 key) signs beside the new one until then, and never after. */
  readonly previousSecretExpiresAt: Date;
}

/** An endpoint's Ed25519 public keys: the current one, and the replaced one while it still signs. */
export type PublicKeys = { readonly current: Buffer | null; readonly previous: { readonly key: Buffer; readonly expiresAt: Date } | null };

/** An active endpoint and what signs its deliveries, for a test send. */
export interface DeliveryTarget {
  readonly endpoint: WebhookEndpoint;
  readonly secrets: SealedSecrets;
}

/**
 * What becomes of an endpoint's deliveries when it changes (delivery/endpointDeliveries.ts provides it;
 * declared here because the registry does not depend on delivery). Each runs in the transaction that
 * changes the endpoint, after its row lock.
 */
export interface EndpointDeliveries {
  /** Disabled: nothing more is attempted, pending retries included (docs/webhooks.md). */
  cancel(db: Queryable, endpointId: string): Promise<void>;
  /** Deleted: its delivery history goes with it. */
  remove(db: Queryable, endpointId: string): Promise<void>;
  /** No longer ordered: the deliveries waiting for their turn are due now. */
  releaseQueued(db: Queryable, endpointId: string): Promise<void>;
  /** An operational notice and its deliveries to the tenant's operational endpoints (operationalEvents.ts). */
  notify(db: Queryable, notice: OperationalNotice): Promise<void>;
}

export interface WebhookRegistryOptions {
  /** Reads of endpoints. */
  readonly db: Queryable;
  /** Changes, each with its admin.webhook.* event in one transaction. */
  readonly writer: EventWriter;
  readonly deliveries: EndpointDeliveries;
  readonly secrets: SecretBox;
  readonly policy: WebhookUrlPolicy & TargetPolicy;
}

/** Who may change a row that a Kubernetes resource owns: only the controller, naming that resource. */
export interface Ownership {
  readonly managedBy?: string | null;
}

/**
 * The webhook registry (docs/webhooks.md): register, list, change, disable, enable, rotate, delete, for the
 * API and the Kubernetes controller alike. Every change writes its `admin.webhook.*` event in the same
 * transaction, and disable and enable their operational notices.
 */
export class WebhookRegistry {
  private readonly db: Queryable;
  private readonly writer: EventWriter;
  private readonly deliveries: EndpointDeliveries;
  private readonly secrets: SecretBox;
  private readonly policy: WebhookUrlPolicy & TargetPolicy;
  private readonly registrationSchema: ReturnType<typeof webhookRegistrationSchema>;
  private readonly changesSchema: ReturnType<typeof webhookChangesSchema>;

  constructor(options: WebhookRegistryOptions) {
    this.db = options.db;
    this.writer = options.writer;
    this.deliveries = options.deliveries;
    this.secrets = options.secrets;
    this.policy = options.policy;
    this.registrationSchema = webhookRegistrationSchema(options.policy);
    this.changesSchema = webhookChangesSchema(options.policy);
  }

  /** Validates `input` (the public request body shape) as the API does; 422 with field details otherwise. */
  async register(tenantId: string, input: unknown, actor: Actor, managedBy: string | null = null): Promise<RegisteredEndpoint> {
    const registration = parseInput(this.registrationSchema, input);
    const configuration = registeredConfiguration(registration, this.secrets);
    await this.checkTarget(configuration.url);
    const secret = generateWebhookSecret();
    const endpoint = await this.writer.recordWith('internal', async (client) => {
      await lockTenantEndpoints(client, tenantId);
      const inserted = await insertEndpointWithinLimit(
        client,
        {
          ...configuration,
          id: generateWebhookId(),
          tenantId,
          kind: registration.kind,
          secretCiphertext: this.secrets.seal(secret),
          managedBy,
        },
        WEBHOOKS_PER_TENANT,
      );
      if (!inserted) {
        throw ValidationError.single('url', `the tenant already has ${WEBHOOKS_PER_TENANT} endpoints; delete one first`);
      }
      return { result: inserted, events: [webhookEvent('admin.webhook.create', inserted, actor)] };
    });
    return { endpoint, secret };
  }

  list(tenantId: string): Promise<WebhookEndpoint[]> {
    return listEndpoints(this.db, tenantId);
  }

  /** Any tenant's endpoint, for the controller (which owns rows across tenants). */
  find(id: string): Promise<WebhookEndpoint | undefined> {
    return findEndpoint(this.db, id);
  }

  /** The newest endpoint a Kubernetes WebhookEndpoint resource owns, for its controller. */
  findManaged(managedBy: string): Promise<WebhookEndpoint | undefined> {
    return findManagedEndpoint(this.db, managedBy);
  }

  /** Idempotent: disabling an inactive endpoint returns it unchanged and records nothing. */
  disable(tenantId: string, id: string, actor: Actor, ownership: Ownership = {}): Promise<WebhookEndpoint> {
    return this.writer.recordWith('internal', async (client) => {
      const endpoint = await this.lockOwned(client, tenantId, id, ownership);
      if (!endpoint.active) return { result: endpoint, events: [] };
      const disabled = await disableEndpoint(client, id, 'manual');
      await this.deliveries.cancel(client, id);
      await this.deliveries.notify(client, endpointNotice('endpoint.disabled', disabled, { reason: 'manual' }));
      return { result: disabled, events: [webhookEvent('admin.webhook.disable', disabled, actor)] };
    });
  }

  /**
   * Active again, its failure count at 0 (docs/webhooks.md "Enabling again"). Idempotent: enabling an active
   * endpoint returns it unchanged and records nothing. The deliveries cancelled when it was disabled stay
   * cancelled, and events written while it was disabled have none: a replay delivers them.
   */
  enable(tenantId: string, id: string, actor: Actor, ownership: Ownership = {}): Promise<WebhookEndpoint> {
    return this.writer.recordWith('internal', async (client) => {
      const endpoint = await this.lockOwned(client, tenantId, id, ownership);
      if (endpoint.active) return { result: endpoint, events: [] };
      const enabled = await enableEndpoint(client, id);
      await this.deliveries.notify(
        client,
        endpointNotice('endpoint.enabled', enabled, { disabled_at: endpoint.disabledAt?.toISOString() }),
      );
      const details = { disabled_reason: endpoint.disabledReason, disabled_at: endpoint.disabledAt?.toISOString() ?? null };
      return { result: enabled, events: [webhookEvent('admin.webhook.enable', enabled, actor, details)] };
    });
  }

  /**
   * Changes an endpoint's configuration in place, its id, secrets and history kept (PATCH /audit/webhooks/{id},
   * and the controller applying a WebhookEndpoint's spec as `managedBy`). `input` is validated as a
   * registration's fields are; the rules of disable apply (404, 403, 409 for a resource's endpoint).
   * Turning `ordered` off releases the deliveries waiting for their turn.
   */
  async change(tenantId: string, id: string, input: unknown, actor: Actor, ownership: Ownership = {}): Promise<WebhookEndpoint> {
    const changes = parseInput(this.changesSchema, input);
    if (changes.url !== undefined) await this.checkTarget(normaliseWebhookUrl(changes.url));
    return this.writer.recordWith('internal', async (client) => {
      const endpoint = await this.lockOwned(client, tenantId, id, ownership);
      const sealed = (await findEndpointSecrets(client, id))!;
      const updated = await updateEndpoint(client, id, changedConfiguration(endpoint, sealed.headers, changes, this.secrets));
      if (endpoint.ordered && !updated.ordered) await this.deliveries.releaseQueued(client, id);
      const event = webhookEvent('admin.webhook.update', updated, actor, { previous: describeEndpoint(endpoint) });
      return { result: updated, events: [event] };
    });
  }

  /** The endpoint's Ed25519 public keys (GET /audit/webhooks/{id}/public-keys): unknown → 404, another tenant's → 403. */
  async publicKeys(tenantId: string, id: string): Promise<PublicKeys> {
    const endpoint = await findEndpoint(this.db, id);
    if (!endpoint) throw new NotFoundError('No such webhook endpoint.');
    if (endpoint.tenantId !== tenantId) throw new ForbiddenError('The webhook endpoint belongs to another tenant.');
    const previous =
      endpoint.previousPublicKey && endpoint.previousSecretExpiresAt
        ? { key: endpoint.previousPublicKey, expiresAt: endpoint.previousSecretExpiresAt }
        : null;
    return { current: endpoint.publicKey, previous };
  }

  async delete(tenantId: string, id: string, actor: Actor, ownership: Ownership = {}): Promise<void> {
    await this.writer.recordWith('internal', async (client) => {
      const endpoint = await this.lockOwned(client, tenantId, id, ownership);
      await deleteEndpoint(client, id);
      await this.deliveries.remove(client, id);
      return { result: undefined, events: [webhookEvent('admin.webhook.delete', endpoint, actor)] };
    });
  }

  /**
   * A new signing secret for the endpoint (docs/webhooks.md "Rotating the signing secret"; the rules and
   * `keep`, for the controller, in secretRotation.ts). `input` is the request body (422 when invalid); an
   * inactive endpoint, which never signs again, is 409 `endpoint_inactive`.
   */
  async rotateSecret(
    tenantId: string,
    id: string,
    input: unknown,
    actor: Actor,
    ownership: Ownership = {},
    keep?: string,
  ): Promise<RotatedSecret> {
    const { overlap_s: overlapS } = parseInput(secretRotationSchema, input);
    const secret = generateWebhookSecret();
    return this.writer.recordWith('internal', async (client) => {
      const endpoint = await this.lockOwned(client, tenantId, id, ownership);
      if (!endpoint.active)
        throw new ConflictError('endpoint_inactive', 'The endpoint is inactive and never signs again; register a new one.');
      const sealed = (await findEndpointSecrets(client, id))!;
      const rotation = { secret, overlapS, nowMs: systemClock.now(), keep };
      const { keys, olderSecretRetired } = rotatedKeys(sealed, endpoint, rotation, this.secrets);
      const rotated = await rotateEndpointSecret(client, id, keys);
      const event = webhookEvent('admin.webhook.rotate_secret', rotated, actor, {
        overlap_s: overlapS,
        previous_secret_expires_at: keys.previousExpiresAt.toISOString(),
        // An older secret still in its overlap stopped signing with this rotation.
        older_secret_retired: olderSecretRetired,
      });
      return { result: { endpoint: rotated, secret, previousSecretExpiresAt: keys.previousExpiresAt }, events: [event] };
    });
  }

  /**
   * The endpoint a test send goes to, with its secrets: unknown → 404, another tenant's → 403, inactive → 409
   * `endpoint_inactive`. An endpoint a WebhookEndpoint resource owns may be tested: a test changes nothing.
   */
  async deliveryTarget(tenantId: string, id: string): Promise<DeliveryTarget> {
    const endpoint = await findEndpoint(this.db, id);
    if (!endpoint) throw new NotFoundError('No such webhook endpoint.');
    if (endpoint.tenantId !== tenantId) throw new ForbiddenError('The webhook endpoint belongs to another tenant.');
    if (!endpoint.active) throw new ConflictError('endpoint_inactive', 'The endpoint is inactive; deliveries to it have stopped for good.');
    const secrets = await findEndpointSecrets(this.db, id);
    if (!secrets) throw new NotFoundError('No such webhook endpoint.');
    return { endpoint, secrets };
  }

  private async checkTarget(url: string): Promise<void> {
    const problem = await targetProblem(new URL(url), this.policy);
    if (problem) throw ValidationError.single('url', `${problem}; webhook targets must be public addresses`);
  }

  /**
   * The rules for disable and delete (docs/webhooks.md): unknown id → 404; another tenant's → 403;
   * owned by a WebhookEndpoint resource and not called by its controller → 409.
   */
  private async lockOwned(client: pg.PoolClient, tenantId: string, id: string, ownership: Ownership): Promise<WebhookEndpoint> {
    // The caller's tenant: when the id is another tenant's, the answer is a 403 and nothing is changed.
    await lockTenantEndpoints(client, tenantId);
    const endpoint = await findEndpoint(client, id, { lock: true });
    if (!endpoint) throw new NotFoundError('No such webhook endpoint.');
    if (endpoint.tenantId !== tenantId) throw new ForbiddenError('The webhook endpoint belongs to another tenant.');
    if (endpoint.managedBy !== null && endpoint.managedBy !== (ownership.managedBy ?? null)) {
      throw new ConflictError(
        'managed_by_kubernetes',
        'This endpoint is managed by a Kubernetes WebhookEndpoint resource; change or delete that resource instead.',
      );
    }
    return endpoint;
  }
}
