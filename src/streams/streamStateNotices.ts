import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import type { LogStream } from './streamStore.ts';
import { streamMetrics } from './streamMetrics.ts';

/**
 * Who hears of a stream turning failing (its destination refused a batch in a way retrying does not heal)
 * and delivering again: the owner's operational notices (roles/streamsRole.ts, docs/webhooks.md
 * "Operational events"). A report is not waited for, and one that fails is logged: the stream goes on.
 */
export interface StreamStateNotices {
  failing(stream: LogStream, reason: string): Promise<void>;
  recovered(stream: LogStream): Promise<void>;
}

/** Where a stream's worker reports: its log, its metrics, and the notices of its state. */
export interface StreamReporting {
  readonly log: Logger;
  readonly metrics?: ServiceMetrics;
  readonly notices?: StreamStateNotices;
}

/** The stream turned failing: logged and reported (StreamWorker keeps the gauge, which it sets at every refusal). */
export function streamTurnedFailing({ log, notices }: StreamReporting, stream: LogStream, reason: string): void {
  log.warn({ stream_id: stream.id, reason }, 'stream failing: its destination refused a batch');
  report(log, stream, notices?.failing(stream, reason));
}

/** The stream delivers again: its gauge cleared, logged and reported. */
export function streamRecovered({ log, metrics, notices }: StreamReporting, stream: LogStream): void {
  if (metrics) streamMetrics(metrics).failing.set({ stream: stream.id }, 0);
  log.info({ stream_id: stream.id }, 'stream delivering again');
  report(log, stream, notices?.recovered(stream));
}

function report(log: Logger, stream: LogStream, sent: Promise<void> | undefined): void {
  sent?.catch((error: unknown) => log.warn({ err: error, stream_id: stream.id }, "could not record the stream's notice"));
}
