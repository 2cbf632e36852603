import { createSecretKey, type KeyObject } from 'node:crypto';
import type { DeliveredEvent } from '../events/deliveryOutbox.ts';
import { SERVICE_VERSION } from '../platform/version.ts';
import { buildEnvelope } from './envelope.ts';
import type { SecretBox } from './secretBox.ts';
import { signDelivery } from './signature.ts';

/** What a delivery attempt POSTs: the envelope's bytes and the headers that go with them. */
export interface DeliveryRequest {
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The request of one attempt (docs/webhooks.md "The delivery request"): the envelope built from the stored
 * event, so that every attempt carries the same bytes, signed at the moment of sending.
 */
export function deliveryRequest(event: DeliveredEvent, attempt: number, signingKey: KeyObject): DeliveryRequest {
  const body = buildEnvelope(event);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': `audit-trail-webhooks/${SERVICE_VERSION}`,
      'x-service-signature': signDelivery(signingKey, body),
      'x-service-event-id': event.eventId,
      'x-service-delivery-attempt': String(attempt),
    },
  };
}

/**
 * Endpoint signing keys, opened from their sealed form and imported once per secret: createHmac would
 * import a text key on every call, and a worker signs thousands of bodies a second with a few keys.
 */
export class SigningKeys {
  private readonly secrets: SecretBox;
  private readonly keys = new Map<string, { sealed: Buffer; key: KeyObject }>();

  constructor(secrets: SecretBox) {
    this.secrets = secrets;
  }

  /** Throws when the secret does not open with this process's key. */
  of(endpointId: string, sealed: Buffer): KeyObject {
    const cached = this.keys.get(endpointId);
    if (cached && cached.sealed.equals(sealed)) return cached.key;
    const key = createSecretKey(Buffer.from(this.secrets.open(sealed), 'utf8'));
    this.keys.set(endpointId, { sealed, key });
    return key;
  }
}
