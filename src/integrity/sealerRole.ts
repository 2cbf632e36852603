import { requireSetting, type Config } from '../config/config.ts';
import type { Database } from '../db/database.ts';
import type { Releasers } from '../platform/lifecycle.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { oldestUnsealedAgeSeconds } from './sealStore.ts';
import { Sealer } from './sealer.ts';
import { TreeHeadSigner } from './treeHeadSigner.ts';

/**
 * The sealer role's wiring (main.ts): the signing key, the loop, the backlog gauge. Returns its readiness
 * check: a sealer whose key a newer one retired no longer signs, and must not look healthy.
 */
export async function startSealer(
  config: Config,
  db: Database,
  log: Logger,
  metrics: ServiceMetrics,
  releasers: Releasers,
): Promise<{ name: string; check: () => Promise<void> }> {
  const key = requireSetting(config.seal.signingKey, 'SEAL_SIGNING_KEY', 'the sealer role');
  const sealer = new Sealer({
    db,
    signer: new TreeHeadSigner(key),
    intervalMs: config.seal.intervalMs,
    heartbeatMs: config.seal.heartbeatMs,
    log,
    metrics,
  });
  metrics.registerSealBacklogAge(() => oldestUnsealedAgeSeconds(db));
  await sealer.start();
  releasers.add('sealer', () => sealer.stop());
  return {
    name: 'sealer',
    check: async () => {
      if (sealer.retired) throw sealer.retired;
    },
  };
}
