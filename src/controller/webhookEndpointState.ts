import { canonicalJson } from '../client/canonicalJson.ts';
import { standardWebhooksSecretOf } from '../client/webhookSignature.ts';
import { normaliseWebhookUrl } from '../webhooks/webhookRules.ts';
import type { WebhookEndpoint } from '../webhooks/webhookEndpoint.ts';
import type { Health } from './conditions.ts';
import { pendingRequest, type AnyResource, type CustomResource, type SecretState } from './kubeResources.ts';
import { ROTATE_ANNOTATION } from './resources.ts';
import { ENABLE_ANNOTATION, type WebhookEndpointSpec } from './webhookEndpointResource.ts';

// What a WebhookEndpoint resource's Secret, status and spec say about its endpoint, without I/O:
// webhookEndpointReconciler.ts acts on it.

/** What status records of the endpoint and of the annotations handled. */
type WebhookEndpointStatus = {
  id?: string;
  active?: boolean;
  consecutiveFailures?: number;
  lastDeliveryAt?: string;
  /** The recreate annotation value the current endpoint was created for. */
  recreateRequest?: string;
  /** The rotate annotation value handled last. */
  rotateRequest?: string;
  /** The enable annotation value handled last. */
  enableRequest?: string;
  previousSecretExpiresAt?: string;
  publicKey?: string;
};

export type WebhookEndpointObject = CustomResource<WebhookEndpointSpec, WebhookEndpointStatus>;

/**
 * Setting this annotation to a new value asks the controller for a new endpoint (new id and signing secret) in
 * the place of one disabled automatically; ENABLE_ANNOTATION enables the same one again instead.
 */
export const RECREATE_ANNOTATION = 'audittrail.dev/recreate';
const SECRET_SIGNING_FIELD = 'signingSecret';
const SECRET_ENDPOINT_FIELD = 'endpointId';
/** The same key in the Standard Webhooks form (whsec_…), for receivers verifying with those libraries. */
const SECRET_STANDARD_WEBHOOKS_FIELD = 'standardWebhooksSecret';
/**
 * Written by a rotation: until then the secret the Secret held before still signs every delivery beside the
 * new one, so receivers that have not yet read the new value keep verifying.
 */
export const SECRET_PREVIOUS_EXPIRY_FIELD = 'previousSecretExpiresAt';

/** What the owned Secret holds for receivers: the signing secret in both forms, and the endpoint it signs for. */
export function secretData(secret: string, endpointId: string): Record<string, string> {
  return {
    [SECRET_SIGNING_FIELD]: secret,
    [SECRET_STANDARD_WEBHOOKS_FIELD]: standardWebhooksSecretOf(secret),
    [SECRET_ENDPOINT_FIELD]: endpointId,
  };
}

/** The health status reports for an endpoint that is where its spec wants it. */
export function healthOf(endpoint: WebhookEndpoint): Health {
  if (endpoint.active) return { state: 'Ready', reason: 'Active', message: `Endpoint ${endpoint.id} receives deliveries.` };
  if (endpoint.disabledReason === 'auto') {
    return {
      state: 'Stalled',
      reason: 'AutoDisabled',
      message: `Endpoint ${endpoint.id} was disabled after ${endpoint.consecutiveFailures} consecutive failed deliveries; set annotation ${ENABLE_ANNOTATION} to a new value to enable it again (same id and secret), or ${RECREATE_ANNOTATION} to create a new endpoint (new id and secret).`,
    };
  }
  return {
    state: 'Stalled',
    reason: 'DisabledOutsideKubernetes',
    message: `Endpoint ${endpoint.id} was disabled outside its spec; the controller enables it again. Set spec.disabled: true to keep it disabled.`,
  };
}

/** The spec's endpoint settings as the API takes them (a change sets every one: absent is the default). */
export function settingsOf(spec: WebhookEndpointSpec) {
  return {
    url: spec.url,
    event_filter: spec.eventFilter ?? [],
    description: spec.description ?? '',
    payload_filter: spec.payloadFilter ?? null,
    timeout_s: spec.timeoutSeconds ?? null,
    retry_schedule_s: spec.retryScheduleSeconds ?? null,
    rate_limit_per_s: spec.rateLimitPerSecond ?? null,
    ordered: spec.ordered ?? false,
    signature_schemes: spec.signatureSchemes ?? ['hmac'],
  };
}

/** Whether a setting changed in the spec (applied in place, same id and secret). Filters compare as canonical JSON. */
export function differsFromSpec(endpoint: WebhookEndpoint, spec: WebhookEndpointSpec): boolean {
  const wanted = settingsOf(spec);
  const sorted = (schemes: readonly string[]) => [...new Set(schemes)].sort().join(',');
  return (
    endpoint.url !== normaliseWebhookUrl(wanted.url) ||
    JSON.stringify(endpoint.eventFilter) !== JSON.stringify([...new Set(wanted.event_filter)]) ||
    endpoint.description !== wanted.description ||
    canonicalJson(endpoint.payloadFilter) !== canonicalJson(wanted.payload_filter) ||
    endpoint.timeoutS !== wanted.timeout_s ||
    JSON.stringify(endpoint.retryScheduleS) !== JSON.stringify(wanted.retry_schedule_s) ||
    endpoint.rateLimitPerS !== wanted.rate_limit_per_s ||
    endpoint.ordered !== wanted.ordered ||
    sorted(endpoint.signatureSchemes) !== sorted(wanted.signature_schemes)
  );
}

/** Whether the owned Secret holds this endpoint's signing secret, the one its receivers verify with. */
export function holdsSecretOf(secret: SecretState, endpoint: WebhookEndpoint): secret is SecretState & { state: 'owned' } {
  return secret.state === 'owned' && secret.values[SECRET_ENDPOINT_FIELD] === endpoint.id;
}

/**
 * When the Secret informer's copy may stand for the Secret (kubeResources.ts secretState): it holds this
 * endpoint's secret and no annotation asks for a rotation or a new endpoint, which act on what the Secret
 * holds and so read it afresh.
 */
export function settledSecret(object: AnyResource, endpoint: WebhookEndpoint | undefined): (secret: SecretState) => boolean {
  const asked =
    pendingRequest(object, ROTATE_ANNOTATION, object.status?.rotateRequest as string | undefined) !== undefined ||
    pendingRequest(object, RECREATE_ANNOTATION, object.status?.recreateRequest as string | undefined) !== undefined;
  return (secret) => !asked && endpoint !== undefined && holdsSecretOf(secret, endpoint);
}

/** The signing secret the owned Secret holds for this endpoint, if it does. */
export function heldSecretOf(secret: SecretState, endpoint: WebhookEndpoint): string | undefined {
  return holdsSecretOf(secret, endpoint) ? secret.values[SECRET_SIGNING_FIELD] : undefined;
}

/** A spec refused by the input gate or the registry's rules, its problems in one message. */
export function invalidSpec(details: ReadonlyArray<{ field: string; message: string }>): Health {
  return { state: 'Stalled', reason: 'InvalidSpec', message: details.map((detail) => `${detail.field}: ${detail.message}`).join('; ') };
}

/** An active endpoint whose Secret someone deleted or changed after the secret was delivered. */
export function secretMissing(spec: WebhookEndpointSpec, endpoint: WebhookEndpoint, secret: SecretState): Health {
  const what =
    secret.state === 'missing'
      ? `Secret ${spec.secretName} was deleted`
      : `Secret ${spec.secretName} no longer holds the signing secret of endpoint ${endpoint.id}`;
  return {
    state: 'Stalled',
    reason: 'SecretMissing',
    message: `${what}; deliveries go on. For a new signing secret in a new Secret, set annotation ${ROTATE_ANNOTATION} to a new value.`,
  };
}
