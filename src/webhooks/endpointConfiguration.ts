import { ed25519SigningKey, rawPublicKey } from '../client/webhookEd25519.ts';
import { ValidationError } from '../platform/errors.ts';
import { applyHeaderChanges, CUSTOM_HEADERS_MAX, openHeaders, sealHeaders, type CustomHeaders } from './customHeaders.ts';
import { asPayloadFilter, compilePayloadFilter } from './payloadFilter.ts';
import { generateEd25519Seed, type SecretBox } from './secretBox.ts';
import { normaliseEventFilter, normaliseWebhookUrl, type WebhookChanges, type WebhookRegistration } from './webhookRules.ts';
import type { WebhookEndpoint } from './webhookEndpoint.ts';
import type { EndpointConfiguration } from './webhookStore.ts';

/**
 * What a registration or a change (both validated by webhookRules.ts) makes of an endpoint's stored
 * configuration: the filter compiled, the headers merged and sealed, an Ed25519 key made the first time the
 * scheme is asked for. No I/O beyond the sealing it is given; the registry writes the result.
 */

/** A new Ed25519 key pair: the sealed seed, and the public key's raw bytes. */
export function newEd25519Key(box: SecretBox): { keyCiphertext: Buffer; publicKey: Buffer } {
  const seed = generateEd25519Seed();
  return { keyCiphertext: box.seal(seed.toString('base64')), publicKey: rawPublicKey(ed25519SigningKey(seed)) };
}

/** The configuration of a new endpoint; every setting not given is the service's default. */
export function registeredConfiguration(registration: WebhookRegistration, box: SecretBox): EndpointConfiguration {
  const headers: CustomHeaders = Object.entries(registration.headers ?? {});
  const signatureSchemes = registration.signature_schemes ?? ['hmac'];
  const payloadFilter = asPayloadFilter(registration.payload_filter);
  return {
    url: normaliseWebhookUrl(registration.url),
    eventFilter: normaliseEventFilter(registration.event_filter),
    description: registration.description,
    payloadFilter,
    payloadFilterPath: payloadFilter === null ? null : compilePayloadFilter(payloadFilter),
    headerNames: headers.map(([name]) => name),
    headersCiphertext: sealHeaders(box, headers),
    timeoutS: registration.timeout_s ?? null,
    retryScheduleS: registration.retry_schedule_s ?? null,
    rateLimitPerS: registration.rate_limit_per_s ?? null,
    ordered: registration.ordered ?? false,
    signatureSchemes,
    ed25519: signatureSchemes.includes('ed25519') ? newEd25519Key(box) : null,
  };
}

/**
 * The endpoint's configuration after `changes`: each field given replaces the current one (null returns it to
 * the default), `headers` sets or removes the headers it names among `sealedHeaders` (the current ones,
 * sealed). `ed25519` is a new key only when Ed25519 is asked for and the endpoint has none (a key, once
 * made, is kept whichever schemes sign), else null: the stored key stays.
 */
export function changedConfiguration(
  current: WebhookEndpoint,
  sealedHeaders: Buffer | null,
  changes: WebhookChanges,
  box: SecretBox,
): EndpointConfiguration {
  const keep = <T>(value: T | undefined, currentValue: T): T => (value === undefined ? currentValue : value);
  const payloadFilter = changes.payload_filter === undefined ? current.payloadFilter : asPayloadFilter(changes.payload_filter);
  let headersCiphertext = sealedHeaders;
  let headerNames = current.headerNames;
  if (changes.headers !== undefined) {
    const headers = applyHeaderChanges(openHeaders(box, sealedHeaders), changes.headers);
    if (!headers) throw ValidationError.single('headers', `an endpoint has at most ${CUSTOM_HEADERS_MAX} headers`);
    headersCiphertext = sealHeaders(box, headers);
    headerNames = headers.map(([name]) => name);
  }
  const signatureSchemes = keep(changes.signature_schemes, current.signatureSchemes);
  return {
    url: changes.url === undefined ? current.url : normaliseWebhookUrl(changes.url),
    eventFilter: changes.event_filter === undefined ? current.eventFilter : normaliseEventFilter(changes.event_filter),
    description: keep(changes.description, current.description),
    payloadFilter,
    payloadFilterPath: payloadFilter === null ? null : compilePayloadFilter(payloadFilter),
    headerNames,
    headersCiphertext,
    timeoutS: keep(changes.timeout_s, current.timeoutS),
    retryScheduleS: keep(changes.retry_schedule_s, current.retryScheduleS),
    rateLimitPerS: keep(changes.rate_limit_per_s, current.rateLimitPerS),
    ordered: keep(changes.ordered, current.ordered),
    signatureSchemes,
    ed25519: signatureSchemes.includes('ed25519') && current.publicKey === null ? newEd25519Key(box) : null,
  };
}
