import type { WebhookEndpoint } from '../webhooks/webhookEndpoint.ts';
import type { WebhookRegistry } from '../webhooks/webhookRegistry.ts';
import type { Actor } from '../events/adminEvent.ts';
import { DEFAULT_ROTATION_OVERLAP_S } from '../webhooks/webhookRules.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { involvedObject, type KubeResources } from './kubeResources.ts';
import type { WebhookEndpointSpec } from './webhookEndpointResource.ts';
import { SECRET_PREVIOUS_EXPIRY_FIELD, secretData, settingsOf, type WebhookEndpointObject } from './webhookEndpointState.ts';

/** Who acts on the registry for a resource: its managed_by, and the actor its admin events name. */
export interface Owner {
  readonly managedBy: string;
  readonly actor: Actor;
}

export interface WebhookEndpointActionsOptions {
  readonly resources: KubeResources;
  readonly registry: WebhookRegistry;
  readonly events: EventRecorder;
}

/**
 * What a reconcile of a WebhookEndpoint does to its endpoint once webhookEndpointReconciler.ts has decided
 * it: each change of the registry together with the owned Secret it implies and the Kubernetes Event that
 * tells of it, in the order that never leaves receivers without a valid secret.
 */
export class WebhookEndpointActions {
  private readonly options: WebhookEndpointActionsOptions;

  constructor(options: WebhookEndpointActionsOptions) {
    this.options = options;
  }

  /** The spec's settings applied to the same endpoint (its id and secret kept), as PATCH applies them. */
  async updateInPlace(
    object: WebhookEndpointObject,
    spec: WebhookEndpointSpec,
    endpoint: WebhookEndpoint,
    { managedBy, actor }: Owner,
  ): Promise<WebhookEndpoint> {
    const updated = await this.options.registry.change(endpoint.tenantId, endpoint.id, settingsOf(spec), actor, { managedBy });
    await this.options.events.record(involvedObject(object), 'Normal', 'EndpointUpdated', `Endpoint ${updated.id} updated in place.`);
    return updated;
  }

  /** The same endpoint active again, its failure count at 0 (spec.disabled turned off, or the enable annotation). */
  async enable(object: WebhookEndpointObject, endpoint: WebhookEndpoint, { managedBy, actor }: Owner): Promise<WebhookEndpoint> {
    const enabled = await this.options.registry.enable(endpoint.tenantId, endpoint.id, actor, { managedBy });
    await this.options.events.record(involvedObject(object), 'Normal', 'EndpointEnabled', `Endpoint ${enabled.id} enabled again.`);
    return enabled;
  }

  /**
   * The rotate annotation on an active endpoint: a new signing secret for the same endpoint, as
   * POST /audit/webhooks/{id}/rotate-secret does, with spec.rotationOverlapSeconds of overlap. The secret the
   * Secret holds (`held`, what receivers have) stays valid for the overlap, even when this is a retry of a
   * rotation that changed the registry and then failed before the Secret was written: the secret of that
   * first attempt, which no one ever saw, is the one retired.
   */
  async rotateInPlace(
    object: WebhookEndpointObject,
    spec: WebhookEndpointSpec,
    current: WebhookEndpoint,
    { managedBy, actor }: Owner,
    held: string | undefined,
  ): Promise<WebhookEndpoint> {
    const overlapS = spec.rotationOverlapSeconds ?? DEFAULT_ROTATION_OVERLAP_S;
    const rotated = await this.options.registry.rotateSecret(
      current.tenantId,
      current.id,
      { overlap_s: overlapS },
      actor,
      { managedBy },
      held,
    );
    const expiresAt = rotated.previousSecretExpiresAt.toISOString();
    await this.options.resources.writeOwnedSecret(object, spec.secretName, {
      ...secretData(rotated.secret, current.id),
      [SECRET_PREVIOUS_EXPIRY_FIELD]: expiresAt,
    });
    await this.options.events.record(
      involvedObject(object),
      'Normal',
      'SecretRotated',
      `Endpoint ${current.id} has a new signing secret in Secret ${spec.secretName}; the previous one also signs deliveries until ${expiresAt}.`,
    );
    return rotated.endpoint;
  }

  /**
   * A new endpoint (new id and secret) in the old one's place, for an endpoint that no longer delivers
   * (auto-disabled, or disabled outside Kubernetes) or whose secret no one ever received: once the Secret
   * holds the new secret, an active old endpoint is deleted (with its delivery history), an inactive one is
   * kept, disabled, with its history.
   */
  async replace(
    object: WebhookEndpointObject,
    spec: WebhookEndpointSpec,
    current: WebhookEndpoint,
    owner: Owner,
  ): Promise<WebhookEndpoint> {
    const replacement = await this.register(object, spec, owner);
    if (current.active) await this.options.registry.delete(current.tenantId, current.id, owner.actor, { managedBy: owner.managedBy });
    return replacement;
  }

  async register(object: WebhookEndpointObject, spec: WebhookEndpointSpec, { managedBy, actor }: Owner): Promise<WebhookEndpoint> {
    const { registry, resources } = this.options;
    const { endpoint, secret } = await registry.register(
      spec.tenantId,
      { ...settingsOf(spec), kind: spec.kind ?? 'events' },
      actor,
      managedBy,
    );
    try {
      await resources.writeOwnedSecret(object, spec.secretName, secretData(secret, endpoint.id));
    } catch (error) {
      await registry.delete(endpoint.tenantId, endpoint.id, actor, { managedBy });
      throw error;
    }
    await this.options.events.record(
      involvedObject(object),
      'Normal',
      'EndpointRegistered',
      `Endpoint ${endpoint.id} registered; signing secret in Secret ${spec.secretName}.`,
    );
    return endpoint;
  }
}
