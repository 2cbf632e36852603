import type { Actor } from '../events/adminEvent.ts';
import { ValidationError } from '../platform/errors.ts';
import { checkInput } from '../platform/inputValidation.ts';
import type { Logger } from '../platform/logger.ts';
import type { WebhookRegistry } from '../webhooks/webhookRegistry.ts';
import { DEFAULT_ROTATION_OVERLAP_S, normaliseWebhookUrl } from '../webhooks/webhookRules.ts';
import { standardWebhooksSecretOf } from '../client/webhookSignature.ts';
import type { WebhookEndpoint } from '../webhooks/webhookStore.ts';
import type { Health } from './conditions.ts';
import type { DeploymentGuard } from './deploymentGuard.ts';
import { reportHealth } from './healthReport.ts';
import type { EventRecorder } from './kubeEvents.ts';
import {
  SecretConflictError,
  involvedObject,
  managedByOf,
  pendingRequest,
  secretConflictMessage,
  type CustomResource,
  type KubeResources,
} from './kubeResources.ts';
import { ROTATE_ANNOTATION, WEBHOOK_ENDPOINT, webhookEndpointSpecSchema, type WebhookEndpointSpec } from './resources.ts';

/** Holds deletion of a WebhookEndpoint until its endpoint (and delivery history) is deleted. */
export const WEBHOOK_FINALIZER = 'audittrail.dev/delete-endpoint';
/**
 * There is no reactivation (docs/webhooks.md): an auto-disabled endpoint stays disabled. Setting this annotation to a new
 * value asks the controller for a new endpoint (new id and signing secret) in its place.
 */
export const RECREATE_ANNOTATION = 'audittrail.dev/recreate';
export const SECRET_SIGNING_FIELD = 'signingSecret';
export const SECRET_ENDPOINT_FIELD = 'endpointId';
/** The same key in the Standard Webhooks form (whsec_…), for receivers verifying with those libraries. */
export const SECRET_STANDARD_WEBHOOKS_FIELD = 'standardWebhooksSecret';
/**
 * Written by a rotation: until then the secret the Secret held before still signs every delivery beside the
 * new one, so receivers that have not yet read the new value keep verifying.
 */
export const SECRET_PREVIOUS_EXPIRY_FIELD = 'previousSecretExpiresAt';

type Status = {
  id?: string;
  active?: boolean;
  consecutiveFailures?: number;
  lastDeliveryAt?: string;
  /** The recreate annotation value the current endpoint was created for. */
  recreateRequest?: string;
  /** The rotate annotation value handled last. */
  rotateRequest?: string;
  previousSecretExpiresAt?: string;
};
export type WebhookEndpointObject = CustomResource<WebhookEndpointSpec, Status>;

export interface WebhookEndpointReconcilerOptions {
  readonly resources: KubeResources;
  readonly registry: WebhookRegistry;
  readonly events: EventRecorder;
  readonly guard: DeploymentGuard;
  readonly log: Logger;
}

/** The annotation values handled, as status keeps them. */
interface Handled {
  readonly recreateRequest: string | undefined;
  readonly rotateRequest: string | undefined;
}

/**
 * Brings one WebhookEndpoint resource and the registry together: registers the endpoint (same validation
 * and SSRF guard as the public API) and writes its signing secret to an owned Secret, applies url, filter
 * and description changes in place, disables it on `disabled: true`, reports delivery health in status
 * (refreshed by every resync), shows an auto-disabled endpoint as stalled until the recreate annotation
 * changes, replaces the signing secret when the rotate annotation asks for it, and deletes the endpoint
 * with its history when the resource goes. Nothing is written to the registry while the Secret's name is
 * taken by someone else.
 */
export class WebhookEndpointReconciler {
  private readonly options: WebhookEndpointReconcilerOptions;

  constructor(options: WebhookEndpointReconcilerOptions) {
    this.options = options;
  }

  async reconcile(informed: WebhookEndpointObject): Promise<void> {
    const { resources, registry, guard } = this.options;
    const cached = resources.freshest(informed);
    if (!(await guard.mayAct(cached))) return;
    const managedBy = managedByOf(cached);
    const actor: Actor = { userId: `kubernetes:${cached.metadata.namespace}/${cached.metadata.name}`, userRole: 'controller' };

    if (cached.metadata.deletionTimestamp) {
      if (!cached.metadata.finalizers?.includes(WEBHOOK_FINALIZER)) return;
      let endpoint = await registry.findManaged(managedBy);
      while (endpoint) {
        await registry.delete(endpoint.tenantId, endpoint.id, actor, { managedBy });
        endpoint = await registry.findManaged(managedBy);
      }
      await resources.removeFinalizer(WEBHOOK_ENDPOINT.plural, cached, WEBHOOK_FINALIZER);
      return;
    }
    const object = await guard.claim(WEBHOOK_ENDPOINT.plural, cached, WEBHOOK_FINALIZER);

    let endpoint = await registry.findManaged(managedBy);
    // The same gate as every API input: a spec the database could not store is invalid, not an error loop.
    const parsed = checkInput(webhookEndpointSpecSchema, object.spec, 'spec');
    if (!parsed.success) {
      const message = parsed.error.details.map((detail) => `${detail.field}: ${detail.message}`).join('; ');
      return this.report(object, endpoint, { state: 'Stalled', reason: 'InvalidSpec', message });
    }
    const spec = parsed.data;

    if (spec.disabled) {
      // Disabled on purpose: a settled state, whatever became of the Secret.
      if (endpoint?.active) {
        endpoint = await registry.disable(endpoint.tenantId, endpoint.id, actor, { managedBy });
        await this.options.events.record(
          involvedObject(object),
          'Normal',
          'EndpointDisabled',
          `Endpoint ${endpoint.id} disabled (spec.disabled).`,
        );
      }
      const message = endpoint
        ? `Endpoint ${endpoint.id} is disabled (spec.disabled).`
        : 'The endpoint was disabled before it was registered.';
      return this.report(object, endpoint, { state: 'Ready', reason: 'Disabled', message });
    }

    // Ownership first: while the Secret's name is taken, nothing is registered, deleted or rewritten.
    const secret = await resources.secretState(object, spec.secretName);
    if (secret.state === 'foreign') {
      return this.report(object, endpoint, {
        state: 'Stalled',
        reason: 'SecretConflict',
        message: secretConflictMessage(object, spec.secretName),
      });
    }
    const annotations = object.metadata.annotations ?? {};
    let handled: Handled = { recreateRequest: object.status?.recreateRequest, rotateRequest: object.status?.rotateRequest };
    const rotation = pendingRequest(object, ROTATE_ANNOTATION, handled.rotateRequest);
    const recreation =
      endpoint?.disabledReason === 'auto' ? pendingRequest(object, RECREATE_ANNOTATION, handled.recreateRequest) : undefined;
    try {
      if (!endpoint) {
        endpoint = await this.register(object, spec, managedBy, actor);
        // Annotations present before the first endpoint ask for nothing more.
        handled = { recreateRequest: annotations[RECREATE_ANNOTATION], rotateRequest: annotations[ROTATE_ANNOTATION] };
      } else if (rotation !== undefined && recreation === undefined && endpoint.active) {
        if (!(await resources.isCurrent(WEBHOOK_ENDPOINT.plural, object))) return;
        const held =
          secret.state === 'owned' && secret.values[SECRET_ENDPOINT_FIELD] === endpoint.id
            ? secret.values[SECRET_SIGNING_FIELD]
            : undefined;
        endpoint = await this.rotateInPlace(object, spec, endpoint, managedBy, actor, held);
        handled = { ...handled, rotateRequest: rotation };
      } else if (rotation !== undefined || recreation !== undefined) {
        if (!(await resources.isCurrent(WEBHOOK_ENDPOINT.plural, object))) return;
        endpoint = await this.replace(object, spec, endpoint, managedBy, actor);
        handled = { recreateRequest: recreation ?? handled.recreateRequest, rotateRequest: rotation ?? handled.rotateRequest };
      } else if (endpoint.active && !(secret.state === 'owned' && secret.values[SECRET_ENDPOINT_FIELD] === endpoint.id)) {
        if (object.status?.id === endpoint.id) {
          // The secret was delivered and someone deleted or changed its Secret: deliveries go on, signed
          // with the secret the receiver has; a new one only when asked for.
          const what =
            secret.state === 'missing'
              ? `Secret ${spec.secretName} was deleted`
              : `Secret ${spec.secretName} no longer holds the signing secret of endpoint ${endpoint.id}`;
          return this.report(object, endpoint, {
            state: 'Stalled',
            reason: 'SecretMissing',
            message: `${what}; deliveries go on. For a new signing secret in a new Secret, set annotation ${ROTATE_ANNOTATION} to a new value.`,
          });
        }
        // Registered, but neither the Secret nor status ever showed it (a crash in between): that secret is
        // known to no one, so the endpoint is replaced.
        if (!(await resources.isCurrent(WEBHOOK_ENDPOINT.plural, object))) return;
        endpoint = await this.replace(object, spec, endpoint, managedBy, actor);
      } else if (endpoint.active && changed(endpoint, spec)) {
        endpoint = await registry.update(
          endpoint.id,
          { url: spec.url, eventFilter: spec.eventFilter ?? [], description: spec.description ?? '' },
          actor,
          managedBy,
        );
        await this.options.events.record(involvedObject(object), 'Normal', 'EndpointUpdated', `Endpoint ${endpoint.id} updated in place.`);
      }
    } catch (error) {
      if (error instanceof ValidationError) {
        const message = error.details.map((detail) => `${detail.field}: ${detail.message}`).join('; ');
        return this.report(object, endpoint, { state: 'Stalled', reason: 'InvalidSpec', message });
      }
      if (error instanceof SecretConflictError) {
        return this.report(object, endpoint, { state: 'Stalled', reason: 'SecretConflict', message: error.message });
      }
      throw error;
    }
    return this.report(object, endpoint, healthOf(endpoint), handled);
  }

  /**
   * The rotate annotation on an active endpoint: a new signing secret for the same endpoint, as
   * POST /audit/webhooks/{id}/rotate-secret does, with spec.rotationOverlapSeconds of overlap. The secret the
   * Secret holds (`held`, what receivers have) stays valid for the overlap, even when this is a retry of a
   * rotation that changed the registry and then failed before the Secret was written: the secret of that
   * first attempt, which no one ever saw, is the one retired.
   */
  private async rotateInPlace(
    object: WebhookEndpointObject,
    spec: WebhookEndpointSpec,
    current: WebhookEndpoint,
    managedBy: string,
    actor: Actor,
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
  private async replace(
    object: WebhookEndpointObject,
    spec: WebhookEndpointSpec,
    current: WebhookEndpoint,
    managedBy: string,
    actor: Actor,
  ): Promise<WebhookEndpoint> {
    const replacement = await this.register(object, spec, managedBy, actor);
    if (current.active) await this.options.registry.delete(current.tenantId, current.id, actor, { managedBy });
    return replacement;
  }

  private async register(
    object: WebhookEndpointObject,
    spec: WebhookEndpointSpec,
    managedBy: string,
    actor: Actor,
  ): Promise<WebhookEndpoint> {
    const { registry, resources } = this.options;
    const { endpoint, secret } = await registry.register(
      spec.tenantId,
      { url: spec.url, event_filter: spec.eventFilter ?? [], description: spec.description ?? '' },
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

  private report(object: WebhookEndpointObject, endpoint: WebhookEndpoint | undefined, health: Health, handled?: Handled): Promise<void> {
    const fields = {
      id: endpoint?.id,
      active: endpoint?.active,
      consecutiveFailures: endpoint?.consecutiveFailures,
      lastDeliveryAt: endpoint?.lastDeliveryAt?.toISOString(),
      recreateRequest: handled ? handled.recreateRequest : object.status?.recreateRequest,
      rotateRequest: handled ? handled.rotateRequest : object.status?.rotateRequest,
      previousSecretExpiresAt: endpoint?.previousSecretExpiresAt?.toISOString(),
    };
    return reportHealth(this.options.resources, this.options.events, WEBHOOK_ENDPOINT.plural, object, fields, health);
  }
}

/** What the owned Secret holds for receivers: the signing secret in both forms, and the endpoint it signs for. */
function secretData(secret: string, endpointId: string): Record<string, string> {
  return {
    [SECRET_SIGNING_FIELD]: secret,
    [SECRET_STANDARD_WEBHOOKS_FIELD]: standardWebhooksSecretOf(secret),
    [SECRET_ENDPOINT_FIELD]: endpointId,
  };
}

function healthOf(endpoint: WebhookEndpoint): Health {
  if (endpoint.active) return { state: 'Ready', reason: 'Active', message: `Endpoint ${endpoint.id} receives deliveries.` };
  if (endpoint.disabledReason === 'auto') {
    return {
      state: 'Stalled',
      reason: 'AutoDisabled',
      message: `Endpoint ${endpoint.id} was disabled after ${endpoint.consecutiveFailures} consecutive failed deliveries; set annotation ${RECREATE_ANNOTATION} to a new value to create a new endpoint (new id and secret).`,
    };
  }
  return {
    state: 'Stalled',
    reason: 'DisabledOutsideKubernetes',
    message: `Endpoint ${endpoint.id} was disabled outside Kubernetes. Set spec.disabled: true to accept that, or annotation ${ROTATE_ANNOTATION} to a new value for a new endpoint.`,
  };
}

function changed(endpoint: WebhookEndpoint, spec: WebhookEndpointSpec): boolean {
  return (
    endpoint.url !== normaliseWebhookUrl(spec.url) ||
    JSON.stringify(endpoint.eventFilter) !== JSON.stringify([...new Set(spec.eventFilter ?? [])]) ||
    endpoint.description !== (spec.description ?? '')
  );
}
