import type { Actor } from '../events/adminEvent.ts';
import { WebhookEndpointActions, type Owner } from './webhookEndpointActions.ts';
import { ValidationError } from '../platform/errors.ts';
import { checkInput } from '../platform/inputValidation.ts';
import type { Logger } from '../platform/logger.ts';
import type { WebhookRegistry } from '../webhooks/webhookRegistry.ts';
import type { WebhookEndpoint } from '../webhooks/webhookEndpoint.ts';
import type { Health } from './conditions.ts';
import { actsOnRequest, decideWebhookEndpoint, type Handled } from './webhookEndpointDecision.ts';
import type { DeploymentGuard } from './deploymentGuard.ts';
import { reportHealth } from './healthReport.ts';
import { healthOf, heldSecretOf, invalidSpec, settledSecret, type WebhookEndpointObject } from './webhookEndpointState.ts';
import type { EventRecorder } from './kubeEvents.ts';
import {
  SecretConflictError,
  involvedObject,
  managedByOf,
  secretConflictMessage,
  type KubeResources,
  type SecretState,
} from './kubeResources.ts';
import { WEBHOOK_ENDPOINT, webhookEndpointSpecSchema, type WebhookEndpointSpec } from './webhookEndpointResource.ts';
import { publicKeyText } from '../client/webhookEd25519.ts';

/** Holds deletion of a WebhookEndpoint until its endpoint (and delivery history) is deleted. */
const WEBHOOK_FINALIZER = 'audittrail.dev/delete-endpoint';

export interface WebhookEndpointReconcilerOptions {
  readonly resources: KubeResources;
  readonly registry: WebhookRegistry;
  readonly events: EventRecorder;
  readonly guard: DeploymentGuard;
  readonly log: Logger;
}

/** The endpoint after a reconcile, what status reports as handled, and its health when not the endpoint's own. */
interface Converged {
  readonly endpoint: WebhookEndpoint;
  readonly handled: Handled;
  readonly health?: Health;
}

/**
 * Brings one WebhookEndpoint resource and the registry together: registers the endpoint (same validation
 * and SSRF guard as the public API) and writes its signing secret to an owned Secret, applies changes of its
 * settings in place, disables it on `disabled: true` and enables it when that goes, reports delivery health
 * (and the Ed25519 public key) in status (refreshed by every resync), shows an auto-disabled endpoint as
 * stalled until the enable or recreate annotation changes, replaces the signing secret when the rotate annotation asks for it, and deletes the endpoint
 * with its history when the resource goes. Nothing is written to the registry while the Secret's name is
 * taken by someone else.
 */
export class WebhookEndpointReconciler {
  private readonly options: WebhookEndpointReconcilerOptions;
  private readonly actions: WebhookEndpointActions;

  constructor(options: WebhookEndpointReconcilerOptions) {
    this.options = options;
    this.actions = new WebhookEndpointActions(options);
  }

  async reconcile(informed: WebhookEndpointObject): Promise<void> {
    const { resources, registry, guard } = this.options;
    const cached = resources.freshest(informed);
    if (!(await guard.mayAct(cached))) return;
    const managedBy = managedByOf(cached);
    const actor: Actor = { userId: `kubernetes:${cached.metadata.namespace}/${cached.metadata.name}`, userRole: 'controller' };
    const owner: Owner = { managedBy, actor };
    if (cached.metadata.deletionTimestamp) return this.finalize(cached, owner);
    const object = await guard.claim(WEBHOOK_ENDPOINT.plural, cached, WEBHOOK_FINALIZER);

    const endpoint = await registry.findManaged(managedBy);
    // The same gate as every API input: a spec the database could not store is invalid, not an error loop.
    const parsed = checkInput(webhookEndpointSpecSchema, object.spec, 'spec');
    if (!parsed.success) return this.report(object, endpoint, invalidSpec(parsed.error.details));
    const spec = parsed.data;
    if (spec.disabled) return this.settleDisabled(object, endpoint, owner);

    // Ownership first: while the Secret's name is taken, nothing is registered, deleted or rewritten.
    const secret = await resources.secretState(object, spec.secretName, settledSecret(object, endpoint));
    if (secret.state === 'foreign') {
      return this.report(object, endpoint, {
        state: 'Stalled',
        reason: 'SecretConflict',
        message: secretConflictMessage(object, spec.secretName),
      });
    }
    let converged: Converged | undefined;
    try {
      converged = await this.converge(object, spec, endpoint, secret, owner);
    } catch (error) {
      if (error instanceof ValidationError) return this.report(object, endpoint, invalidSpec(error.details));
      if (error instanceof SecretConflictError) {
        return this.report(object, endpoint, { state: 'Stalled', reason: 'SecretConflict', message: error.message });
      }
      throw error;
    }
    if (converged) return this.report(object, converged.endpoint, converged.health ?? healthOf(converged.endpoint), converged.handled);
  }

  /** The resource is going: every endpoint it made is deleted with its history, then the finalizer goes. */
  private async finalize(cached: WebhookEndpointObject, { managedBy, actor }: Owner): Promise<void> {
    const { registry, resources } = this.options;
    if (!cached.metadata.finalizers?.includes(WEBHOOK_FINALIZER)) return;
    let endpoint = await registry.findManaged(managedBy);
    while (endpoint) {
      await registry.delete(endpoint.tenantId, endpoint.id, actor, { managedBy });
      endpoint = await registry.findManaged(managedBy);
    }
    await resources.removeFinalizer(WEBHOOK_ENDPOINT.plural, cached, WEBHOOK_FINALIZER);
  }

  /** spec.disabled: a settled state, whatever became of the Secret. */
  private async settleDisabled(
    object: WebhookEndpointObject,
    found: WebhookEndpoint | undefined,
    { managedBy, actor }: Owner,
  ): Promise<void> {
    let endpoint = found;
    if (endpoint?.active) {
      endpoint = await this.options.registry.disable(endpoint.tenantId, endpoint.id, actor, { managedBy });
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

  /**
   * Brings the endpoint to what the spec and annotations ask for (webhookEndpointDecision.ts): registered,
   * enabled, rotated, replaced or updated in place. Undefined when the object changed meanwhile (the next
   * reconcile sees the newer one).
   */
  private async converge(
    object: WebhookEndpointObject,
    spec: WebhookEndpointSpec,
    endpoint: WebhookEndpoint | undefined,
    secret: SecretState,
    owner: Owner,
  ): Promise<Converged | undefined> {
    const step = decideWebhookEndpoint(object, spec, endpoint, secret);
    if (actsOnRequest(step) && !(await this.options.resources.isCurrent(WEBHOOK_ENDPOINT.plural, object))) return undefined;
    const { handled } = step;
    switch (step.kind) {
      case 'register':
        return { endpoint: await this.actions.register(object, spec, owner), handled };
      case 'enable':
        return { endpoint: await this.actions.enable(object, step.endpoint, owner), handled };
      case 'rotate-in-place': {
        const rotated = await this.actions.rotateInPlace(object, spec, step.endpoint, owner, heldSecretOf(secret, step.endpoint));
        return { endpoint: rotated, handled };
      }
      case 'replace':
        return { endpoint: await this.actions.replace(object, spec, step.endpoint, owner), handled };
      case 'secret-missing':
        // Deliveries go on, signed with the secret the receiver has; a new one only when asked for.
        return { endpoint: step.endpoint, handled, health: step.health };
      case 'update-in-place':
        return { endpoint: await this.actions.updateInPlace(object, spec, step.endpoint, owner), handled };
      case 'settled':
        return { endpoint: step.endpoint, handled };
    }
  }

  private report(object: WebhookEndpointObject, endpoint: WebhookEndpoint | undefined, health: Health, handled?: Handled): Promise<void> {
    const fields = {
      id: endpoint?.id,
      active: endpoint?.active,
      consecutiveFailures: endpoint?.consecutiveFailures,
      lastDeliveryAt: endpoint?.lastDeliveryAt?.toISOString(),
      recreateRequest: handled ? handled.recreateRequest : object.status?.recreateRequest,
      rotateRequest: handled ? handled.rotateRequest : object.status?.rotateRequest,
      enableRequest: handled ? handled.enableRequest : object.status?.enableRequest,
      previousSecretExpiresAt: endpoint?.previousSecretExpiresAt?.toISOString(),
      publicKey: endpoint?.publicKey ? publicKeyText(endpoint.publicKey) : undefined,
    };
    return reportHealth(this.options.resources, this.options.events, WEBHOOK_ENDPOINT.plural, object, fields, health);
  }
}
