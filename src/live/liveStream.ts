import type { Queryable } from '../db/database.ts';
import type { EventFilters } from '../events/eventFilters.ts';
import type { LiveFeed } from './liveFeed.ts';
import { liveDocuments, sealedSize, type LiveDocument } from './liveStore.ts';
import { systemClock } from '../platform/clock.ts';

/** Leaves read per query: a stream that fell behind catches up in bounded steps. */
const CHUNK_LEAVES = 1_000;
/** The longest a stream waits without looking, in case a notification was missed (a sealer of an older release sends none). */
const LIVE_POLL_MS = 5_000;
/** How often a stream checks that its key or portal session is still valid (a revocation ends the stream). */
const REAUTHENTICATE_MS = 5_000;
/** What EventSource clients wait before reconnecting after the stream ends. */
const LIVE_RETRY_MS = 1_000;

export interface LiveStreamOptions {
  readonly db: Queryable;
  readonly feed: LiveFeed;
  readonly tenantId: string;
  readonly filters: EventFilters;
  /** The first leaf to send. */
  readonly fromLeaf: number;
  readonly heartbeatMs: number;
  /** Aborted when the client goes away or the process stops: the stream then ends, cleanly. */
  readonly signal: AbortSignal;
  /** Rejects when the caller's credentials are no longer valid: the stream then ends. */
  readonly reauthenticate: () => Promise<unknown>;
  readonly now?: () => number;
}

/**
 * The text of a live stream (Server-Sent Events): every event the filters match, in the tenant's sealed
 * leaf order from `fromLeaf` on, each with its event id as the SSE id, so that a client reconnecting with
 * Last-Event-ID resumes exactly after it; a heartbeat comment when nothing was sent for `heartbeatMs`.
 * Pulled by the response: it reads no further than the client takes.
 */
export async function* liveStreamText(options: LiveStreamOptions): AsyncGenerator<string> {
  const { db, feed, tenantId, filters, signal, heartbeatMs } = options;
  const now = options.now ?? (() => systemClock.now());
  // Sent at once, so the client knows the stream is open (and from which moment it follows the trail).
  yield `retry: ${LIVE_RETRY_MS}\n: live\n\n`;
  let next = options.fromLeaf;
  let lastSentMs = now();
  let checkedMs = now();
  while (!signal.aborted) {
    const seen = feed.generation(tenantId);
    const size = await sealedSize(db, tenantId);
    while (next < size && !signal.aborted) {
      const to = Math.min(size, next + CHUNK_LEAVES);
      const documents = await liveDocuments(db, tenantId, filters, next, to);
      next = to;
      if (documents.length > 0) {
        yield documents.map(eventFrame).join('');
        lastSentMs = now();
      }
    }
    if (signal.aborted) return;
    if (now() - checkedMs >= REAUTHENTICATE_MS) {
      checkedMs = now();
      if (
        !(await options.reauthenticate().then(
          () => true,
          () => false,
        ))
      )
        return;
    }
    if (now() - lastSentMs >= heartbeatMs) {
      yield ': heartbeat\n\n';
      lastSentMs = now();
    }
    await feed.wait(tenantId, seen, Math.max(1, Math.min(LIVE_POLL_MS, heartbeatMs - (now() - lastSentMs))), signal);
  }
}

/**
 * One SSE event: the event id, then the document. A document's JSON has no line break inside a string; any
 * between its tokens start a data line of their own, which the client joins back with a line feed.
 */
function eventFrame({ eventId, document }: LiveDocument): string {
  return `id: ${eventId}\ndata: ${document.split(/\r\n|\r|\n/).join('\ndata: ')}\n\n`;
}
