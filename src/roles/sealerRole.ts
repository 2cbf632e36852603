import { requireSetting } from '../config/config.ts';
import { oldestUnsealedAgeSeconds } from '../integrity/sealStore.ts';
import { Sealer } from '../integrity/sealer.ts';
import { TreeHeadSigner } from '../integrity/treeHeadSigner.ts';
import type { Role } from './role.ts';

/**
 * The sealer: the signing key, the loop, the backlog gauge. Its readiness check fails once a newer key
 * retired this one: such a sealer no longer signs, and must not look healthy.
 */
export const role: Role = {
  async start(parts) {
    const { config, db, metrics } = parts;
    const key = requireSetting(config.seal.signingKey, 'SEAL_SIGNING_KEY', 'the sealer role');
    const sealer = new Sealer({
      db,
      signer: new TreeHeadSigner(key),
      intervalMs: config.seal.intervalMs,
      heartbeatMs: config.seal.heartbeatMs,
      checkpointOrigin: config.seal.checkpointOrigin,
      log: parts.log.child({ role: 'sealer' }),
      metrics,
    });
    metrics.registerSealBacklogAge(() => oldestUnsealedAgeSeconds(db));
    // Its key's registration is its first query: where it waits for Postgres at start, like every role.
    await parts.whenPostgresAnswers('register the signing key', () => sealer.start());
    parts.releasers.add('sealer', () => sealer.stop());
    const check = async () => {
      if (sealer.retired) throw sealer.retired;
    };
    return { readiness: [{ name: 'sealer', check }] };
  },
};
