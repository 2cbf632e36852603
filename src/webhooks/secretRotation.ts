import { newEd25519Key } from './endpointConfiguration.ts';
import type { SealedSecrets, SecretBox } from './secretBox.ts';
import type { WebhookEndpoint } from './webhookEndpoint.ts';
import type { RotatedKeys } from './webhookStore.ts';

/**
 * A rotation of an endpoint's signing secret, decided without I/O (docs/webhooks.md "Rotating the signing
 * secret"): the registry (webhookRegistry.ts) reads the sealed secrets under the endpoint's lock, and writes
 * what this returns. The secret replaced keeps signing beside the new one for `overlapS` seconds; one that was
 * still overlapping from an earlier rotation is retired at once, so at most two are ever valid. The Ed25519
 * key rotates with the secret while the endpoint signs with one, with the same overlap.
 *
 * `keep` is for the controller: the secret its Secret holds, i.e. the one receivers have. When it is one of
 * the endpoint's valid secrets it becomes the previous one, whichever it is: a rotation repeated after a
 * crash that came before the Secret was written then keeps the receivers' secret valid, not the new secret
 * that no one ever saw.
 */
export function rotatedKeys(
  sealed: SealedSecrets,
  endpoint: Pick<WebhookEndpoint, 'publicKey'>,
  rotation: { readonly secret: string; readonly overlapS: number; readonly nowMs: number; readonly keep?: string | undefined },
  box: SecretBox,
): { readonly keys: RotatedKeys; readonly olderSecretRetired: boolean } {
  const { keep } = rotation;
  const previous =
    keep !== undefined && sealed.previous && box.open(sealed.previous.ciphertext) === keep && box.open(sealed.current) !== keep
      ? sealed.previous.ciphertext
      : sealed.current;
  const ed25519 = sealed.ed25519 && {
    ...newEd25519Key(box),
    previousKeyCiphertext: sealed.ed25519.current,
    previousPublicKey: endpoint.publicKey!,
  };
  const keys = {
    secret: box.seal(rotation.secret),
    previous,
    previousExpiresAt: new Date(rotation.nowMs + rotation.overlapS * 1000),
    ed25519,
  };
  return { keys, olderSecretRetired: sealed.previous !== null && previous !== sealed.previous.ciphertext };
}
