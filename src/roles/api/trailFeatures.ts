import { CursorCodec } from '../../events/cursor.ts';
import { EXPORT_ROW_CAP, EventExporter } from '../../events/eventExport.ts';
import { EventReader } from '../../events/eventReader.ts';
import { eventRoutes, eventsOpenApi } from '../../http/routes/events.ts';
import { exportOpenApi, exportRoutes } from '../../http/routes/export.ts';
import { integrityOpenApi, integrityRoutes } from '../../http/routes/integrity.ts';
import { liveOpenApi, liveRoutes } from '../../http/routes/live.ts';
import { retentionOpenApi, retentionRoutes } from '../../http/routes/retention.ts';
import { transparencyLogOpenApi, transparencyLogRoutes } from '../../http/routes/transparencyLog.ts';
import { IntegrityReader } from '../../integrity/integrityReader.ts';
import { TransparencyLog } from '../../integrity/transparencyLog.ts';
import { RetentionPolicies } from '../../lifecycle/retentionPolicies.ts';
import { LiveFeed } from '../../live/liveFeed.ts';
import { LongReadSlots } from '../../platform/longReadSlots.ts';
import type { Queryable } from '../../db/database.ts';
import type { SharedParts } from '../sharedParts.ts';
import type { ApiFeature, Feature } from './apiFeature.ts';
import { liveStreamMetrics } from '../../live/liveStreamMetrics.ts';

/** Reading, exporting and proving the trail, and its retention policy. */
export const trailFeatures: ApiFeature = async (parts, pepper) => {
  const { db } = parts;
  return [
    // Before the events routes: /audit/events/:event_id would take "live" for an event id.
    await liveFeature(parts),
    // Pages may come from a read replica; lookups read the primary (events/eventReader.ts).
    { router: eventRoutes(new EventReader(db, new CursorCodec(pepper), pageReads(parts))), openapi: eventsOpenApi },
    { router: integrityRoutes(new IntegrityReader(db, pepper), parts.config.seal.intervalMs), openapi: integrityOpenApi },
    { router: transparencyLogRoutes(new TransparencyLog(db)), openapi: transparencyLogOpenApi },
    {
      router: retentionRoutes(new RetentionPolicies({ db, writer: await parts.writer(), defaultPeriod: parts.config.retentionDefault })),
      openapi: retentionOpenApi,
    },
    await exportFeature(parts, pepper),
  ];
};

/**
 * Exports stream from the long-read pool, so lists and lookups never wait behind them: their proofs are
 * read there too, by an IntegrityReader of that pool's own.
 */
async function exportFeature(parts: SharedParts, pepper: string): Promise<Feature> {
  const longReads = parts.longReads();
  return {
    router: exportRoutes({
      exporter: new EventExporter(longReads.db, EXPORT_ROW_CAP, parts.config.longReadFetchRows),
      replicaExporter: replicaExporter(parts),
      writer: await parts.writer(),
      integrity: new IntegrityReader(longReads.db, pepper),
      longReads,
    }),
    openapi: exportOpenApi,
  };
}

/**
 * Where list pages, the count and the action list read: the replica only with READ_REPLICA_READS=all. By
 * default they stay on the primary, where they see every acknowledged write and never queue behind exports
 * on a replica the exports keep busy (docs/operations.md "Replicas").
 */
function pageReads(parts: SharedParts): Queryable {
  const replica = parts.config.readReplicaReads === 'all' ? parts.replicaReads() : undefined;
  return replica ?? parts.db;
}

/** Exports without proofs on the read replica, when DATABASE_READ_URL names one (whatever READ_REPLICA_READS). */
function replicaExporter(parts: SharedParts): EventExporter | undefined {
  const reads = parts.longReadReplica();
  return reads && new EventExporter(reads, EXPORT_ROW_CAP, parts.config.longReadFetchRows);
}

/**
 * Live streams of the trail (Server-Sent Events): woken by the sealer's notifications, admitted within caps
 * of their own (they hold no connection while they wait, so they need not count against exports), and
 * ended as soon as the process begins to stop, so that their clients reconnect to another pod.
 */
async function liveFeature(parts: SharedParts): Promise<Feature> {
  const { config } = parts;
  const feed = new LiveFeed({ databaseUrl: config.databaseSessionUrl, log: parts.log.child({ component: 'live-feed' }) });
  await feed.start();
  parts.releasers.add('live feed', () => feed.stop());
  const slots = new LongReadSlots(config.live, liveStreamMetrics(parts.metrics), 'concurrent_live_streams');
  return {
    router: liveRoutes({
      db: parts.db,
      feed,
      admission: { admit: (tenantId, what) => slots.take(tenantId, what) },
      heartbeatMs: config.live.heartbeatMs,
      stopping: parts.stopping,
      sealIntervalMs: config.seal.intervalMs,
    }),
    openapi: liveOpenApi,
  };
}
