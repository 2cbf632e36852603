import type { Actor } from '../events/adminEvent.ts';
import { ValidationError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { WebhookRegistry } from '../webhooks/webhookRegistry.ts';
import { normaliseWebhookUrl } from '../webhooks/webhookRules.ts';
import type { WebhookEndpoint } from '../webhooks/webhookStore.ts';
import { setCondition } from './conditions.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { SecretConflictError, involvedObject, managedByOf, type CustomResource, type KubeResources } from './kubeResources.ts';
import { WEBHOOK_ENDPOINT, webhookEndpointSpecSchema, type WebhookEndpointSpec } from './resources.ts';

/** Holds deletion of a WebhookEndpoint until its endpoint (and delivery history) is deleted. */
export const WEBHOOK_FINALIZER = 'audittrail.dev/delete-endpoint';
/**
 * SPEC.md has no reactivation: an auto-disabled endpoint stays disabled. Setting this annotation to a new
 * value asks the controller for a new endpoint (new id and signing secret) in its place.
 */
export const RECREATE_ANNOTATION = 'audittrail.dev/recreate';
export const SECRET_SIGNING_FIELD = 'signingSecret';
export const SECRET_ENDPOINT_FIELD = 'endpointId';

type Status = {
  id?: string;
  active?: boolean;
  consecutiveFailures?: number;
  lastDeliveryAt?: string;
  /** The recreate annotation value the current endpoint was created for. */
  recreateRequest?: string;
};
export type WebhookEndpointObject = CustomResource<WebhookEndpointSpec, Status>;

export interface WebhookEndpointReconcilerOptions {
  readonly resources: KubeResources;
  readonly registry: WebhookRegistry;
  readonly events: EventRecorder;
  readonly log: Logger;
}

/**
 * Brings one WebhookEndpoint resource and the registry together: registers the endpoint (same validation
 * and SSRF guard as the public API) and writes its signing secret to an owned Secret, applies url, filter
 * and description changes in place, reports delivery health in status (refreshed by every resync), shows an
 * auto-disabled endpoint as Ready=False/AutoDisabled until the recreate annotation changes, and deletes the
 * endpoint with its history when the resource goes.
 */
export class WebhookEndpointReconciler {
  private readonly options: WebhookEndpointReconcilerOptions;

  constructor(options: WebhookEndpointReconcilerOptions) {
    this.options = options;
  }

  async reconcile(object: WebhookEndpointObject): Promise<void> {
    const { resources, registry } = this.options;
    const managedBy = managedByOf(object);
    const actor: Actor = { userId: `kubernetes:${object.metadata.namespace}/${object.metadata.name}`, userRole: 'controller' };

    if (object.metadata.deletionTimestamp) {
      let endpoint = await registry.findManaged(managedBy);
      while (endpoint) {
        await registry.delete(endpoint.tenantId, endpoint.id, actor, { managedBy });
        endpoint = await registry.findManaged(managedBy);
      }
      await resources.setFinalizer(WEBHOOK_ENDPOINT.plural, object, WEBHOOK_FINALIZER, false);
      return;
    }
    await resources.setFinalizer(WEBHOOK_ENDPOINT.plural, object, WEBHOOK_FINALIZER, true);

    const parsed = webhookEndpointSpecSchema.safeParse(object.spec);
    if (!parsed.success) {
      await this.report(object, undefined, { reason: 'InvalidSpec', message: parsed.error.issues.map((issue) => `spec.${issue.path.join('.')}: ${issue.message}`).join('; ') });
      return;
    }
    const spec = parsed.data;
    const recreateRequest = object.metadata.annotations?.[RECREATE_ANNOTATION];
    let endpoint = await registry.findManaged(managedBy);
    const recreate = endpoint?.disabledReason === 'auto' && recreateRequest !== undefined && recreateRequest !== object.status?.recreateRequest;
    const secretEndpointId = endpoint && (await resources.ownedSecretValue(object, spec.secretName, SECRET_ENDPOINT_FIELD));
    try {
      if (!endpoint || recreate || (endpoint.active && secretEndpointId !== endpoint.id)) {
        // Never registered, re-creation requested, or registered but the secret never reached the Secret.
        if (endpoint && endpoint.active && !recreate) await registry.delete(endpoint.tenantId, endpoint.id, actor, { managedBy });
        endpoint = await this.register(object, spec, managedBy, actor);
      } else if (endpoint.active && changed(endpoint, spec)) {
        endpoint = await registry.update(endpoint.id, { url: spec.url, eventFilter: spec.eventFilter ?? [], description: spec.description ?? '' }, actor, managedBy);
        await this.options.events.record(involvedObject(object), 'Normal', 'EndpointUpdated', `Endpoint ${endpoint.id} updated in place.`);
      }
    } catch (error) {
      if (error instanceof ValidationError) {
        await this.report(object, endpoint, { reason: 'InvalidSpec', message: error.details.map((detail) => `${detail.field}: ${detail.message}`).join('; ') });
        return;
      }
      if (error instanceof SecretConflictError) {
        await this.report(object, endpoint, { reason: 'SecretConflict', message: error.message });
        return;
      }
      throw error;
    }
    await this.report(object, endpoint, undefined, recreate ? recreateRequest : object.status?.recreateRequest);
  }

  private async register(object: WebhookEndpointObject, spec: WebhookEndpointSpec, managedBy: string, actor: Actor): Promise<WebhookEndpoint> {
    const { registry, resources } = this.options;
    const { endpoint, secret } = await registry.register(
      spec.tenantId,
      { url: spec.url, event_filter: spec.eventFilter ?? [], description: spec.description ?? '' },
      actor,
      managedBy,
    );
    try {
      await resources.writeOwnedSecret(object, spec.secretName, { [SECRET_SIGNING_FIELD]: secret, [SECRET_ENDPOINT_FIELD]: endpoint.id });
    } catch (error) {
      await registry.delete(endpoint.tenantId, endpoint.id, actor, { managedBy });
      throw error;
    }
    await this.options.events.record(involvedObject(object), 'Normal', 'EndpointRegistered', `Endpoint ${endpoint.id} registered; signing secret in Secret ${spec.secretName}.`);
    return endpoint;
  }

  private async report(object: WebhookEndpointObject, endpoint: WebhookEndpoint | undefined, problem?: { reason: string; message: string }, recreateRequest?: string): Promise<void> {
    const generation = object.metadata.generation;
    let ready: { status: 'True' | 'False'; reason: string; message: string };
    if (problem) ready = { status: 'False', ...problem };
    else if (endpoint?.active) ready = { status: 'True', reason: 'Active', message: `Endpoint ${endpoint.id} receives deliveries.` };
    else if (endpoint?.disabledReason === 'auto') {
      ready = {
        status: 'False',
        reason: 'AutoDisabled',
        message: `Endpoint ${endpoint.id} was disabled after ${endpoint.consecutiveFailures} consecutive failed deliveries; set annotation ${RECREATE_ANNOTATION} to a new value to create a new endpoint (new id and secret).`,
      };
    } else ready = { status: 'False', reason: 'Disabled', message: `Endpoint ${endpoint?.id} is disabled.` };
    const status = {
      ...(endpoint ? { id: endpoint.id, active: endpoint.active, consecutiveFailures: endpoint.consecutiveFailures } : {}),
      ...(endpoint?.lastDeliveryAt ? { lastDeliveryAt: endpoint.lastDeliveryAt.toISOString() } : {}),
      ...(recreateRequest === undefined ? {} : { recreateRequest }),
      observedGeneration: generation,
      conditions: setCondition(object.status?.conditions, { type: 'Ready', ...ready, observedGeneration: generation }),
    };
    const wasReason = object.status?.conditions?.find((condition) => condition.type === 'Ready')?.reason;
    if ((await this.options.resources.setStatus(WEBHOOK_ENDPOINT.plural, object, status)) && ready.status === 'False' && wasReason !== ready.reason) {
      await this.options.events.record(involvedObject(object), 'Warning', ready.reason, ready.message);
    }
  }
}

function changed(endpoint: WebhookEndpoint, spec: WebhookEndpointSpec): boolean {
  return (
    endpoint.url !== normaliseWebhookUrl(spec.url) ||
    JSON.stringify(endpoint.eventFilter) !== JSON.stringify([...new Set(spec.eventFilter ?? [])]) ||
    endpoint.description !== (spec.description ?? '')
  );
}
