import { createPublicKey, sign, type KeyObject } from 'node:crypto';
import { keyIdOf, treeHeadSigningInput, type SignedTreeHead } from '../client/integrity.ts';

/** The sealer's Ed25519 key (SEAL_SIGNING_KEY): signs tree heads, and names itself by its key id. */
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
