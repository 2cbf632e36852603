import type { Config } from '../config/config.ts';
import type { Queryable } from '../db/database.ts';
import { recordOperationalEvent } from '../delivery/operationalFanOut.ts';
import type { DestinationOptions } from '../streams/destinations/openDestination.ts';
import { StreamRunner } from '../streams/streamRunner.ts';
import type { LogStream } from '../streams/streamStore.ts';
import type { StreamStateNotices } from '../streams/streamStateNotices.ts';
import { streamNotice } from '../webhooks/operationalEvents.ts';
import type { Role } from './role.ts';

/** How the service reaches stream destinations: the streams role's sends, and the api role's test sends. */
export function destinationOptions(config: Config): DestinationOptions {
  return {
    timeoutMs: config.streams.timeoutMs,
    allowPrivateTargets: config.webhookAllowPrivateTargets,
    hecAckTimeoutMs: config.streams.hecAckTimeoutMs,
  };
}

/**
 * Log streams: a StreamRunner sharing the deployment's streams with the other processes of the role. It
 * reads the trail (sealed leaves) and the destinations' sealed secrets.
 */
export const role: Role = {
  async start(parts) {
    const { config } = parts;
    const runner = new StreamRunner({
      db: parts.db,
      // Backfills and catching up read the trail on the read replica within its lag bound, when there is one.
      reads: parts.replicaReads(),
      secrets: parts.secretBox('the streams role'),
      destinations: destinationOptions(config),
      pollMs: config.streams.pollMs,
      leaseMs: config.streams.leaseMs,
      capacity: config.streams.perProcess,
      failingRetryMs: config.streams.failingRetryMs,
      notices: streamNotices(parts.db),
      log: parts.log.child({ role: 'streams' }),
      metrics: parts.metrics,
      databaseUrl: config.databaseSessionUrl,
    });
    runner.start();
    parts.releasers.add('log streams', () => runner.stop());
    return {};
  },
};

/**
 * A tenant's stream turning failing or delivering again is an operational notice to that tenant
 * (docs/webhooks.md "Operational events"); a deployment-wide stream has no tenant to tell.
 */
function streamNotices(db: Queryable): StreamStateNotices {
  const record = async (stream: LogStream, type: 'stream.failing' | 'stream.recovered', details: Record<string, unknown>) => {
    if (stream.ownerTenantId === null) return;
    const subject = { id: stream.id, tenantId: stream.ownerTenantId, destinationType: stream.destinationType };
    await recordOperationalEvent(db, streamNotice(type, subject, details));
  };
  return {
    failing: (stream, reason) => record(stream, 'stream.failing', { reason }),
    recovered: (stream) => record(stream, 'stream.recovered', {}),
  };
}
