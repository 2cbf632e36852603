import { requireSetting } from '../config/config.ts';
import { ensureEventPartitions } from '../events/eventStore.ts';
import { ingestRoutes } from '../http/routes/ingest.ts';
import { JetStreamIngest } from '../ingestion/jetstreamIngest.ts';
import type { Role } from './role.ts';
import { systemClock } from '../platform/clock.ts';

// Future months whose partitions the ingest role keeps ready, re-checked every few hours.
const PARTITION_MONTHS_AHEAD = 3;
const PARTITION_CHECK_INTERVAL_MS = 6 * 3_600_000;

/**
 * Ingestion: HTTP batches on the internal port and the JetStream input, one write path for both; and the
 * partitions of the months ahead, so that no write waits on creating one.
 */
export const role: Role = {
  behindService: true,
  // Ingest writes nearly every event: it publishes their deliveries itself, and the relays take the rest.
  publishesDeliveries: true,
  async start(parts) {
    const { config, db, releasers } = parts;
    const log = parts.log.child({ role: 'ingest' });
    const tokens = requireSetting(config.ingestTokens, 'INGEST_TOKENS', 'the ingest role');
    const [writer, bus] = [await parts.writer(), await parts.bus()];
    const ingest = new JetStreamIngest({
      bus: bus.connection,
      names: bus.names,
      streamReplicas: config.natsStreamReplicas,
      writer,
      window: config.ingestWindow,
      log,
      metrics: parts.metrics,
    });
    await ingest.start();
    releasers.add('jetstream ingest', () => ingest.stop());
    const keepPartitionsAhead = () =>
      ensureEventPartitions(db, monthsAhead(PARTITION_MONTHS_AHEAD)).catch((error: Error) =>
        log.warn({ err: error }, 'could not create upcoming event partitions; will retry'),
      );
    await keepPartitionsAhead();
    const timer = setInterval(keepPartitionsAhead, PARTITION_CHECK_INTERVAL_MS).unref();
    releasers.add('partition maintenance', () => clearInterval(timer));
    return { internalRoutes: [ingestRoutes(writer, tokens, config.ingestWindow)] };
  },
};

function monthsAhead(count: number): number[] {
  const now = new Date(systemClock.now());
  return Array.from({ length: count + 1 }, (_, index) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + index, 1));
}
