import type { SecretBox } from '../webhooks/secretBox.ts';
import type { DestinationInput } from './streamRules.ts';
import type { LogStream } from './streamStore.ts';

/**
 * A destination's secrets at rest: the member of each type that is one (HEC token, Datadog API key, S3
 * secret access key, AMQP password), and for `https` the signing secret the service generated, sealed together with
 * SECRET_ENCRYPTION_KEY like webhook secrets. What is stored in the clear, and shown by the API, is the
 * rest: never a secret.
 */

const SECRET_MEMBERS = { splunk_hec: 'token', datadog: 'api_key', s3: 'secret_access_key', amqp: 'password', https: undefined } as const;

interface SealedSecrets {
  /** The destination's own secret member, when its type has one. */
  readonly secret?: string;
  /** The https signing secret. */
  readonly signing_secret?: string;
}

/** The destination split into what is shown and what is sealed. */
export function sealDestination(
  destination: DestinationInput,
  box: SecretBox,
  signingSecret?: string,
): { shown: Record<string, unknown>; ciphertext: Buffer } {
  const member = SECRET_MEMBERS[destination.type];
  const { [member ?? '']: secret, ...shown } = destination as unknown as Record<string, unknown>;
  const sealed: SealedSecrets = {
    ...(member ? { secret: secret as string } : {}),
    ...(signingSecret ? { signing_secret: signingSecret } : {}),
  };
  return { shown, ciphertext: box.seal(JSON.stringify(sealed)) };
}

/** The whole destination again, secrets included, and the signing secret: only for sending. */
export function destinationOf(stream: LogStream, box: SecretBox): { destination: DestinationInput; signingSecret: string | undefined } {
  const sealed = JSON.parse(box.open(stream.secretCiphertext)) as SealedSecrets;
  const member = SECRET_MEMBERS[stream.destinationType];
  const destination = { ...stream.destination, type: stream.destinationType, ...(member ? { [member]: sealed.secret } : {}) };
  return { destination: destination as unknown as DestinationInput, signingSecret: sealed.signing_secret };
}
