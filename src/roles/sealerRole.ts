import { requireSetting } from '../config/config.ts';
import { oldestUnsealedAgeSeconds } from '../integrity/sealQueueStore.ts';
import { Sealer } from '../integrity/sealer.ts';
import { registerSealerMetrics } from '../integrity/sealerMetrics.ts';
import { TreeHeadSigner } from '../integrity/treeHeadSigner.ts';
import { SignedHeadStream } from '../integrity/signedHeadStream.ts';
import type { Role } from './role.ts';

/**
 * The sealer: the signing key, the loop, the backlog gauge. Its readiness check fails once a newer key
 * retired this one: such a sealer no longer signs, and must not look healthy.
 */
export const role: Role = {
  async start(parts) {
    const { config, db, metrics } = parts;
    const key = requireSetting(config.seal.signingKey, 'SEAL_SIGNING_KEY', 'the sealer role');
    // The fork guard's ledger: the latest signed head of each tenant, kept in JetStream beside the database.
    const bus = await parts.bus();
    const sealer = new Sealer({
      db,
      signer: new TreeHeadSigner(key),
      intervalMs: config.seal.intervalMs,
      heartbeatMs: config.seal.heartbeatMs,
      checkpointOrigin: config.seal.checkpointOrigin,
      ledger: new SignedHeadStream(bus.connection, bus.names, config.natsStreamReplicas),
      log: parts.log.child({ role: 'sealer' }),
      metrics,
    });
    registerSealerMetrics(metrics.registry, {
      oldestUnsealedAgeSeconds: () => oldestUnsealedAgeSeconds(db),
      forkedTenants: () => sealer.forked.keys(),
    });
    // Its key's registration is its first query: where it waits for Postgres at start, like every role.
    await parts.whenPostgresAnswers('register the signing key', () => sealer.start());
    parts.releasers.add('sealer', () => sealer.stop());
    const check = async () => {
      if (sealer.retired) throw sealer.retired;
    };
    // A forked tenant does not make the sealer unready: the other tenants' sealing goes on, and
    // AuditTrailTreeForked pages (audit_tree_forked).
    return { readiness: [{ name: 'sealer', check }] };
  },
};
