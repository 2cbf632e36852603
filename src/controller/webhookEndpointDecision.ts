import type { WebhookEndpoint } from '../webhooks/webhookEndpoint.ts';
import type { Health } from './conditions.ts';
import { pendingRequest, type SecretState } from './kubeResources.ts';
import { ROTATE_ANNOTATION } from './resources.ts';
import { ENABLE_ANNOTATION, type WebhookEndpointSpec } from './webhookEndpointResource.ts';
import { RECREATE_ANNOTATION, differsFromSpec, holdsSecretOf, secretMissing, type WebhookEndpointObject } from './webhookEndpointState.ts';

/**
 * What a reconcile of a live, enabled WebhookEndpoint resource does to its endpoint, decided without I/O:
 * webhookEndpointReconciler.ts reads the endpoint and the owned Secret (after refusing a foreign one), hands
 * them in with the resource, and carries out the answer. In order:
 *
 * - no endpoint yet: one is registered; annotations present before it ask for nothing more.
 * - disabled and not to be recreated: enabled again when it was disabled by hand (spec.disabled turned off:
 *   REST refuses to disable a resource's endpoint) or, after an auto-disable, when the enable annotation asks.
 * - the rotate annotation asks, on an active endpoint not to be recreated: its signing secret rotated in place.
 * - the rotate or (after an auto-disable) the recreate annotation asks: a new endpoint in its place.
 * - active, and the Secret does not hold its secret: SecretMissing when the secret was delivered (status shows
 *   the endpoint); replaced when no one ever saw it (a crash between registering and writing the Secret).
 * - active, and a setting differs from the spec: updated in place (same id and secret).
 * - otherwise settled as it is.
 *
 * Enabling, rotating and replacing act on what the resource asks only if it is still the current version.
 */
export type WebhookEndpointStep =
  | { readonly kind: 'register'; readonly handled: Handled }
  | {
      readonly kind: 'enable' | 'rotate-in-place' | 'replace' | 'update-in-place' | 'settled';
      readonly endpoint: WebhookEndpoint;
      readonly handled: Handled;
    }
  | { readonly kind: 'secret-missing'; readonly endpoint: WebhookEndpoint; readonly handled: Handled; readonly health: Health };

/** The annotation values handled, as status keeps them. */
export interface Handled {
  readonly recreateRequest: string | undefined;
  readonly rotateRequest: string | undefined;
  readonly enableRequest: string | undefined;
}

/** Whether the step writes what the resource asks for, and so needs the resource to be the current version. */
export function actsOnRequest(step: WebhookEndpointStep): boolean {
  return step.kind === 'enable' || step.kind === 'rotate-in-place' || step.kind === 'replace';
}

export function decideWebhookEndpoint(
  object: WebhookEndpointObject,
  spec: WebhookEndpointSpec,
  endpoint: WebhookEndpoint | undefined,
  secret: SecretState,
): WebhookEndpointStep {
  const annotations = object.metadata.annotations ?? {};
  const status = object.status;
  const handled: Handled = {
    recreateRequest: status?.recreateRequest,
    rotateRequest: status?.rotateRequest,
    enableRequest: status?.enableRequest,
  };
  if (!endpoint) {
    return {
      kind: 'register',
      handled: {
        recreateRequest: annotations[RECREATE_ANNOTATION],
        rotateRequest: annotations[ROTATE_ANNOTATION],
        enableRequest: annotations[ENABLE_ANNOTATION],
      },
    };
  }
  const rotation = pendingRequest(object, ROTATE_ANNOTATION, handled.rotateRequest);
  const recreation = endpoint.disabledReason === 'auto' ? pendingRequest(object, RECREATE_ANNOTATION, handled.recreateRequest) : undefined;
  const enabling = pendingRequest(object, ENABLE_ANNOTATION, handled.enableRequest);
  if (!endpoint.active && recreation === undefined && (endpoint.disabledReason === 'manual' || enabling !== undefined)) {
    return { kind: 'enable', endpoint, handled: { ...handled, enableRequest: annotations[ENABLE_ANNOTATION] } };
  }
  if (rotation !== undefined && recreation === undefined && endpoint.active) {
    return { kind: 'rotate-in-place', endpoint, handled: { ...handled, rotateRequest: rotation } };
  }
  if (rotation !== undefined || recreation !== undefined) {
    return {
      kind: 'replace',
      endpoint,
      handled: { ...handled, recreateRequest: recreation ?? handled.recreateRequest, rotateRequest: rotation ?? handled.rotateRequest },
    };
  }
  if (endpoint.active && !holdsSecretOf(secret, endpoint)) {
    if (status?.id === endpoint.id) return { kind: 'secret-missing', endpoint, handled, health: secretMissing(spec, endpoint, secret) };
    return { kind: 'replace', endpoint, handled };
  }
  if (endpoint.active && differsFromSpec(endpoint, spec)) return { kind: 'update-in-place', endpoint, handled };
  return { kind: 'settled', endpoint, handled };
}
