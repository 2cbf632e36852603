import { createSecretKey, type KeyObject } from 'node:crypto';
import { SERVICE_VERSION } from '../platform/version.ts';
import { ed25519SigningKey } from '../client/webhookEd25519.ts';
import { openHeaders, type CustomHeaders } from '../webhooks/customHeaders.ts';
import { secretsSigningAt, type SealedSecrets, type SecretBox } from '../webhooks/secretBox.ts';
import { signatureHeaders } from '../client/webhookSigning.ts';
import { systemClock } from '../platform/clock.ts';

/** What a delivery attempt POSTs: the envelope's bytes and the headers that go with them. */
export interface DeliveryRequest {
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
}

/** What signs and accompanies an endpoint's requests now: its keys of each scheme, newest first, and its custom headers. */
export interface EndpointSigning {
  readonly hmac: readonly KeyObject[];
  readonly ed25519: readonly KeyObject[];
  readonly headers: CustomHeaders;
}

/**
 * The headers of every delivery, test sends included, around an envelope's bytes: the endpoint's custom
 * headers first (their names can never be ours: customHeaders.ts refuses them), then ours.
 */
export function signedRequest(
  body: string,
  eventId: string,
  attempt: number,
  signing: EndpointSigning,
  nowMs = systemClock.now(),
): DeliveryRequest {
  const headers: Record<string, string> = {};
  for (const [name, value] of signing.headers) headers[name] = value;
  headers['content-type'] = 'application/json';
  headers['user-agent'] = `audit-trail-webhooks/${SERVICE_VERSION}`;
  Object.assign(headers, signatureHeaders(signing.hmac, eventId, body, nowMs, signing.ed25519));
  headers['x-service-event-id'] = eventId;
  headers['x-service-delivery-attempt'] = String(attempt);
  return { body, headers };
}

interface OpenedKey {
  readonly sealed: Buffer;
  readonly key: KeyObject;
}

/** An endpoint's opened keys and headers, each with the sealed form it was opened from, and what they came to last. */
interface Opened {
  readonly hmac: readonly OpenedKey[];
  readonly ed25519: readonly OpenedKey[];
  readonly headers: { readonly sealed: Buffer | null; readonly headers: CustomHeaders };
  /** The read the last answer was made from, and whether a previous key signed then. */
  readonly from: SealedSecrets;
  readonly overlapping: boolean;
  readonly signing: EndpointSigning;
}

/**
 * Endpoint signing keys and headers, opened from their sealed form and imported once per secret: createHmac
 * would import a text key on every call, and a worker signs thousands of bodies a second with a few keys.
 * Whether a previous key may still sign is decided on every call, against the time of signing, never
 * cached: an expired key never signs again, however long it stays in this cache. The deliveries of a batch
 * share their endpoint's read, so the answer is kept for the next call with the same read and the same
 * verdict on the previous keys.
 */
export class SigningKeys {
  private readonly secrets: SecretBox;
  private readonly opened = new Map<string, Opened>();

  constructor(secrets: SecretBox) {
    this.secrets = secrets;
  }

  /** What signs and goes with a request at `nowMs`. Throws when a secret does not open with this process's key. */
  at(endpointId: string, sealed: SealedSecrets, nowMs: number): EndpointSigning {
    const overlapping = sealed.previous !== null && nowMs < sealed.previous.expiresAt.getTime();
    const cached = this.opened.get(endpointId);
    if (cached?.from === sealed && cached.overlapping === overlapping) return cached.signing;
    const signing = secretsSigningAt(sealed, nowMs);
    const hmac = signing.hmac.map((secret) => this.open(cached?.hmac, secret, (text) => createSecretKey(Buffer.from(text, 'utf8'))));
    const ed25519 = signing.ed25519.map((seed) =>
      this.open(cached?.ed25519, seed, (text) => ed25519SigningKey(Buffer.from(text, 'base64'))),
    );
    const sameHeaders =
      cached !== undefined && (cached.headers.sealed === null ? sealed.headers === null : sealed.headers?.equals(cached.headers.sealed));
    const headers = sameHeaders ? cached.headers : { sealed: sealed.headers, headers: openHeaders(this.secrets, sealed.headers) };
    const answer = { hmac: hmac.map(({ key }) => key), ed25519: ed25519.map(({ key }) => key), headers: headers.headers };
    this.opened.set(endpointId, { hmac, ed25519, headers, from: sealed, overlapping, signing: answer });
    return answer;
  }

  /** A key already opened for the endpoint (a rotation moves the current one to previous), or a new one. */
  private open(known: readonly OpenedKey[] | undefined, sealed: Buffer, importKey: (text: string) => KeyObject): OpenedKey {
    for (const key of known ?? []) if (key.sealed.equals(sealed)) return key;
    return { sealed, key: importKey(this.secrets.open(sealed)) };
  }
}
