import type { Database } from '../db/database.ts';
import { systemClock } from '../platform/clock.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { lagPast, streamLag } from './streamLag.ts';
import { streamMetrics } from './streamMetrics.ts';
import type { LogStream } from './streamStore.ts';

/** Each tenant's tree size as a pass of the worker read it, and the stream's next leaf in it when the pass ended. */
export interface Trails {
  readonly sizes: ReadonlyMap<string, number>;
  readonly positions: ReadonlyMap<string, number>;
}

/**
 * The lag gauges after a pass of the stream's worker that did not lose the stream: a failed one too, so that
 * while a destination is down the lag grows where alerts see it (between tries, it is as old as the last try).
 * A pass that went through gives its own sizes and positions; after a failure (`trails` undefined) they are
 * read again (a batch of the chunk may have moved the position before it). Nothing when Postgres does not
 * answer: the pass's own retry comes first.
 */
export async function publishStreamLag(
  db: Database,
  log: Logger,
  metrics: ServiceMetrics,
  stream: LogStream,
  trails: Trails | undefined,
): Promise<void> {
  const series = streamMetrics(metrics);
  try {
    const { events, oldestWaitingAt } = trails ? await lagPast(db, stream, trails.sizes, trails.positions) : await streamLag(db, stream);
    series.lagEvents.set({ stream: stream.id }, events);
    series.lagSeconds.set(
      { stream: stream.id },
      oldestWaitingAt === undefined ? 0 : Math.max(0, (systemClock.now() - oldestWaitingAt.getTime()) / 1000),
    );
  } catch (error) {
    log.warn({ err: error, stream_id: stream.id }, 'could not read the stream lag');
  }
}

/**
 * Removes every series of a stream, when its worker stops: the process that holds the stream next (or the same
 * one, after a change) reports it afresh, and a deleted or paused stream has none (counters restart from 0,
 * which rate() and increase() take as a reset).
 */
export function removeStreamSeries(metrics: ServiceMetrics, streamId: string): void {
  const series = streamMetrics(metrics);
  for (const gauge of [series.failing, series.lagEvents, series.lagSeconds, series.eventsDelivered]) gauge.remove({ stream: streamId });
  for (const outcome of ['retry', 'too_large', 'refused']) series.batchesFailed.remove({ stream: streamId, outcome });
}
