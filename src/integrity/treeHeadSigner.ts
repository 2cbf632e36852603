import { createPublicKey, sign, type KeyObject } from 'node:crypto';
import { keyIdOf, treeHeadSigningInput, type SignedTreeHead } from '../client/integrity.ts';
import { checkpointText } from '../client/signedNote.ts';

/**
 * The sealer's Ed25519 key (SEAL_SIGNING_KEY): signs tree heads, and names itself by its key id. The same key
 * signs each head's checkpoint note too (docs/integrity.md "Checkpoints and tiles"), under the name of the
 * tenant's log (its origin), so that a tenant's verifier key names its own log.
 */
export class TreeHeadSigner {
  readonly keyId: string;
  readonly publicKeyPem: string;
  private readonly privateKey: KeyObject;

  constructor(privateKey: KeyObject) {
    this.privateKey = privateKey;
    const publicKey = createPublicKey(privateKey);
    this.publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    this.keyId = keyIdOf(publicKey);
  }

  /** The Ed25519 signature of the checkpoint note of this head: what its signature line carries after the key id. */
  signCheckpoint(origin: string, head: Pick<SignedTreeHead, 'tree_size' | 'root_hash'>): Buffer {
    const text = checkpointText({ origin, size: head.tree_size, rootHash: Buffer.from(head.root_hash, 'hex') });
    return sign(null, Buffer.from(text), this.privateKey);
  }

  sign(head: Omit<SignedTreeHead, 'signature' | 'key_id'>): SignedTreeHead {
    const unsigned = { ...head, key_id: this.keyId };
    const signature = sign(null, Buffer.from(treeHeadSigningInput(unsigned)), this.privateKey).toString('base64');
    return {
      tenant_id: unsigned.tenant_id,
      tree_size: unsigned.tree_size,
      root_hash: unsigned.root_hash,
      timestamp: unsigned.timestamp,
      key_id: unsigned.key_id,
      signature,
    };
  }
}
