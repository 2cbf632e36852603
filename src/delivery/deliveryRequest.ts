import { createSecretKey, type KeyObject } from 'node:crypto';
import { SERVICE_VERSION } from '../platform/version.ts';
import { buildEnvelope, type DeliveredEvent } from '../client/webhookEnvelope.ts';
import { secretsSigningAt, type SealedSecrets, type SecretBox } from '../webhooks/secretBox.ts';
import { signatureHeaders } from '../client/webhookSigning.ts';

/** What a delivery attempt POSTs: the envelope's bytes and the headers that go with them. */
export interface DeliveryRequest {
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The request of one attempt (docs/webhooks.md "The delivery request"): the envelope built from the stored
 * event, so that every attempt carries the same bytes, signed at the moment of sending with every secret
 * valid then (`signingKeys`, newest first).
 */
export function deliveryRequest(
  event: DeliveredEvent,
  attempt: number,
  signingKeys: readonly KeyObject[],
  nowMs = Date.now(),
): DeliveryRequest {
  return signedRequest(buildEnvelope(event), event.eventId, attempt, signingKeys, nowMs);
}

/** The headers of every delivery, test sends included, around an envelope's bytes. */
export function signedRequest(
  body: string,
  eventId: string,
  attempt: number,
  signingKeys: readonly KeyObject[],
  nowMs = Date.now(),
): DeliveryRequest {
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': `audit-trail-webhooks/${SERVICE_VERSION}`,
      ...signatureHeaders(signingKeys, eventId, body, nowMs),
      'x-service-event-id': eventId,
      'x-service-delivery-attempt': String(attempt),
    },
  };
}

interface OpenedKey {
  readonly sealed: Buffer;
  readonly key: KeyObject;
}

/**
 * Endpoint signing keys, opened from their sealed form and imported once per secret: createHmac would
 * import a text key on every call, and a worker signs thousands of bodies a second with a few keys.
 * Whether a previous secret may still sign is decided on every call, against the time of signing, never
 * cached: an expired secret never signs again, however long its key stays in this cache.
 */
export class SigningKeys {
  private readonly secrets: SecretBox;
  private readonly keys = new Map<string, { current: OpenedKey; previous: OpenedKey | undefined }>();

  constructor(secrets: SecretBox) {
    this.secrets = secrets;
  }

  /** The keys that sign at `nowMs`, newest first. Throws when a secret does not open with this process's key. */
  at(endpointId: string, sealed: SealedSecrets, nowMs: number): KeyObject[] {
    const [currentSecret, previousSecret] = secretsSigningAt(sealed, nowMs);
    const cached = this.keys.get(endpointId);
    const current = this.open(cached, currentSecret!);
    const previous = previousSecret ? this.open(cached, previousSecret) : undefined;
    this.keys.set(endpointId, { current, previous });
    return previous ? [current.key, previous.key] : [current.key];
  }

  /** A key already opened for the endpoint (a rotation moves the current one to previous), or a new one. */
  private open(cached: { current: OpenedKey; previous: OpenedKey | undefined } | undefined, sealed: Buffer): OpenedKey {
    for (const known of [cached?.current, cached?.previous]) if (known?.sealed.equals(sealed)) return known;
    return { sealed, key: createSecretKey(Buffer.from(this.secrets.open(sealed), 'utf8')) };
  }
}
