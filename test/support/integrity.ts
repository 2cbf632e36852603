import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { Database } from '../../src/db/database.ts';
import { Sealer } from '../../src/integrity/sealer.ts';
import { TreeHeadSigner } from '../../src/integrity/treeHeadSigner.ts';
import { testLogger } from './service.ts';

/** A fresh Ed25519 key pair, the private half as SEAL_SIGNING_KEY takes it. */
export function sealKeyPair(): { privateKey: KeyObject; privatePem: string; publicPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKey,
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

export interface TestSealer {
  readonly sealer: Sealer;
  readonly db: Database;
  readonly keyId: string;
  /** Seals everything committed so far, as one pass of the role's loop does. */
  sealNow(): ReturnType<Sealer['sealPass']>;
  close(): Promise<void>;
}

/** A sealer that only seals when told (no loop), so tests decide when leaves are appended. */
export async function startTestSealer(databaseUrl: string, key: KeyObject, options: { heartbeatMs?: number } = {}): Promise<TestSealer> {
  const db = new Database({ url: databaseUrl, poolSize: 2, applicationName: 'test sealer', log: testLogger() });
  const signer = new TreeHeadSigner(key);
  const sealer = new Sealer({ db, signer, intervalMs: 3_600_000, heartbeatMs: options.heartbeatMs ?? 3_600_000, log: testLogger() });
  // No loop: the test's passes are the only ones.
  await sealer.registerKey().catch(async (error: unknown) => {
    await db.close();
    throw error;
  });
  return {
    sealer,
    db,
    keyId: signer.keyId,
    sealNow: () => sealer.sealPass(),
    async close() {
      await db.close();
    },
  };
}
