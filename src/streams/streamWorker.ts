// A stream's pass (read ahead, send, settle the position in flight) is one sequence whose ordering guarantees (at
// most one batch past the durable position) are easier to check in one place than across modules; its parts that
// stand alone (batches, chunks ahead, reading a chunk, the lease store, the lag gauges) are apart.
import type { Database } from '../db/database.ts';
import { firstLeafSince, treeSizes } from '../integrity/treeStore.ts';
import { PollLoop, type NextPass } from '../platform/pollLoop.ts';
import type { ChunkPreparer } from './chunkPreparer.ts';
import { type Chunk, ChunksAhead } from './chunksAhead.ts';
import type { Destination } from './destinations/destination.ts';
import { itemEncoderOf } from './destinations/itemEncoders.ts';
import { type ChunkSource, readStreamChunk } from './streamChunkReader.ts';
import { publishStreamLag, removeStreamSeries, type Trails } from './streamLagGauges.ts';
import { advancePosition, recordFailure, startPosition } from './streamLeaseStore.ts';
import { afterDelivered, afterError, afterFailure, afterPass, type FailedSend, type RetryState } from './streamRetries.ts';
import { streamRecovered, streamTurnedFailing, type StreamReporting } from './streamStateNotices.ts';
import type { DestinationInput } from './streamRules.ts';
import { streamPositions, type LogStream } from './streamStore.ts';
import { streamMetrics } from './streamMetrics.ts';

/** Leaves read at once from one tenant's trail: batches are cut from them. */
const CHUNK_LEAVES = 5_000;
/** Chunks of one tenant per round, before the stream's other tenants get theirs. */
const CHUNKS_PER_ROUND = 8;
/**
 * Chunks read and put together ahead of the one being sent: with one, a backfill waited for most chunks' read
 * and preparation (BENCHMARKS.md, "Log streams' throughput: the batches put together on a thread of their own").
 */
const READ_AHEAD_CHUNKS = 2;
/**
 * A chunk read ahead at the end of a round is sent by the next pass only if read this recently: a redaction or
 * an expiry committed after the read would otherwise be sent as it was before, for as long as the stream's
 * other tenants took their rounds.
 */
const READ_AHEAD_MAX_AGE_MS = 1_000;

export interface StreamWorkerOptions extends StreamReporting {
  readonly db: Database;
  readonly reads?: { choose(): Promise<Database> }; // a read replica, one server per pass (streamRunner.ts)
  /** Puts the chunks' batches together away from the event loop; shared by the process' streams. */
  readonly preparer: ChunkPreparer;
  /** This process's lease name: every position it writes is guarded by it. */
  readonly owner: string;
  /** How long an idle stream sleeps before looking for new leaves (new sealed heads wake it no sooner). */
  readonly pollMs: number;
  /** How long a failing stream waits before trying its destination again. */
  readonly failingRetryMs: number;
}

/** What one pass over a stream's tenants came to. */
type PassOutcome =
  | { readonly kind: 'idle' | 'progress'; readonly trails: Trails }
  | { readonly kind: 'lost' }
  | { readonly kind: 'failed'; readonly outcome: FailedSend };

/**
 * Delivers one stream while this process holds it: round after round, each tenant with sealed leaves past
 * the stream's position gets a chunk of them read in leaf order (events the filter leaves out are skipped
 * but passed), cut into batches within the destination's limits on the preparer's thread while the chunks
 * before are sent, each batch led by the tenant's latest signed tree head when the stream carries heads, and
 * sent one at a time: a batch is acknowledged before the position moves past it, in the same statement that
 * checks the lease; the next batch is sent while that statement commits, and the one after only once it has.
 * A crash repeats at most the batch in flight and the one before it (if its position was not yet committed),
 * never skips one. What follows a failure (a backoff, smaller batches, failing) is decided by
 * streamRetries.ts; this class carries it out. Only this stream waits: each stream has a worker of its own.
 */
export class StreamWorker {
  readonly stream: LogStream;
  private readonly destination: Destination;
  /** What the chunks are read and put together for: the stream, the destination as created, the preparer. */
  private readonly chunkSource: ChunkSource;
  private readonly options: StreamWorkerOptions;
  private readonly loop: PollLoop;
  /** Failures in a row, failing or not, and the batch limits (streamRetries.ts). */
  private retry: RetryState;
  /** A tenant's next chunks, read during the last round of the pass before: the next pass starts with them. */
  private readAhead: ChunksAhead | undefined;
  /**
   * The position update of the last batch the destination accepted, still being committed while the next batch
   * is sent (a commit waits for its fsync, ~5 ms, and a backfill sends a batch every few ms). Settled before
   * the next update starts and before a pass ends: at most one batch is sent past the durable position.
   */
  private positionInFlight: Promise<boolean> | undefined;
  /** Aborted by stop(): a send that only waits (for an acknowledgement) gives up rather than hold the stop. */
  private readonly stopping = new AbortController();

  constructor(stream: LogStream, destination: Destination, destinationInput: DestinationInput, options: StreamWorkerOptions) {
    this.stream = stream;
    this.destination = destination;
    this.chunkSource = { stream, destinationInput, preparer: options.preparer };
    this.options = options;
    this.retry = {
      retries: 0,
      failing: stream.failingSince !== null,
      limits: { ...itemEncoderOf(destinationInput, stream.format).limits },
    };
    this.loop = new PollLoop({
      pass: () => this.round(),
      onError: (error) => {
        // Postgres away, say: the same pass again after a backoff; positions are where they were.
        this.options.log.warn({ err: error, stream_id: this.stream.id }, 'stream pass failed; will retry');
        const next = afterError(this.retry);
        this.retry = next.state;
        return next.waitMs;
      },
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Ends the round in progress at its next batch boundary and closes the destination. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop.stop();
    await this.destination.close().catch(() => undefined);
    // Every series of the stream goes with the worker.
    if (this.options.metrics) removeStreamSeries(this.options.metrics, this.stream.id);
  }

  /** The stream's series, when the worker reports any. */
  private get series() {
    return this.options.metrics && streamMetrics(this.options.metrics);
  }

  get done(): boolean {
    return this.loop.stopped;
  }

  /** One pass and the pause it calls for: none after progress, the poll when idle, a backoff after a failure. */
  private async round(): Promise<NextPass> {
    const outcome = await this.pass();
    if (outcome.kind === 'lost') {
      this.options.log.info({ stream_id: this.stream.id }, 'stream no longer held by this process (taken over, or deleted)');
      return 'stop';
    }
    // A send given up because the stream is stopping is no failure of the destination's.
    if (this.loop.stopped && outcome.kind === 'failed') return 'stop';
    const { db, log, metrics } = this.options;
    // After a failure too, so that the lag of a destination that is down grows (streamLagGauges.ts).
    if (metrics && !this.loop.stopped)
      await publishStreamLag(db, log, metrics, this.stream, outcome.kind === 'failed' ? undefined : outcome.trails);
    if (outcome.kind === 'failed') return this.handleFailure(outcome.outcome);
    const next = afterPass(this.retry, outcome.kind, this.options.pollMs);
    this.retry = next.state;
    return next.waitMs;
  }

  /** Carries out what follows a failed batch (streamRetries.ts); returns how long to wait before the next try. */
  private async handleFailure(outcome: FailedSend): Promise<number> {
    const { db, owner, log } = this.options;
    const metrics = this.series;
    const stream = this.stream.id;
    metrics?.batchesFailed.inc({ stream, outcome: outcome.kind });
    const next = afterFailure(this.retry, outcome, this.options);
    this.retry = next.state;
    const { action } = next;
    if (action.kind === 'shrink') {
      log.warn(
        { stream_id: stream, max_items: next.state.limits.maxItems, reason: action.reason },
        'destination refused the batch size; halving it',
      );
      return action.waitMs;
    }
    await recordFailure(db, this.stream, owner, action.reason, action.kind === 'refused');
    if (action.kind === 'refused') {
      if (outcome.kind !== 'refused') metrics?.batchesFailed.inc({ stream, outcome: 'refused' });
      if (action.turnedFailing) streamTurnedFailing(this.options, this.stream, action.reason);
      metrics?.failing.set({ stream }, 1);
      return action.waitMs;
    }
    log.info({ stream_id: stream, reason: action.reason, retry_in_ms: action.waitMs }, 'stream batch not accepted; retrying');
    return action.waitMs;
  }

  /**
   * One round: for each tenant with leaves past the stream's position, up to CHUNKS_PER_ROUND chunks (a
   * tenant with a backlog does not hold the stream's other tenants up for long). The next chunk is read
   * while the current one is sent, so Postgres and the destination work at the same time; a round that ends
   * with a tenant's next chunk read hands it to the next pass, which starts with it if the tenant is still
   * there (a backfill's pipeline does not drain at every round).
   */
  private async pass(): Promise<PassOutcome> {
    let outcome: PassOutcome;
    try {
      outcome = await this.deliverRounds();
    } catch (error) {
      await this.settlePosition().catch(() => undefined);
      throw error;
    }
    return (await this.settlePosition()) ? outcome : { kind: 'lost' };
  }

  /** Waits for the position update in flight, if any; false when it found the stream no longer held. */
  private async settlePosition(): Promise<boolean> {
    const update = this.positionInFlight;
    this.positionInFlight = undefined;
    return update === undefined ? true : await update;
  }

  private async deliverRounds(): Promise<PassOutcome> {
    const { db, owner } = this.options;
    const carried = this.readAhead;
    this.readAhead = undefined;
    const reads = (await this.options.reads?.choose()) ?? db;
    const sizes = await treeSizes(reads, this.stream.tenantIds ?? undefined);
    const positions = new Map((await streamPositions(db, this.stream.id)).map((position) => [position.tenantId, position.nextLeaf]));
    let progress = false;
    for (const [tenantId, size] of sizes) {
      if (this.loop.stopped) break;
      const since = () => firstLeafSince(db, tenantId, this.stream.startAt.getTime());
      let position = positions.get(tenantId) ?? (await startPosition(db, this.stream.id, owner, tenantId, await since()));
      if (position === undefined) return { kind: 'lost' };
      // Read and put together while the one before is sent; those of the pass before only if read recently.
      const fresh = carried?.freshWithin(READ_AHEAD_MAX_AGE_MS) ? carried : undefined;
      const ahead = new ChunksAhead(
        tenantId,
        position,
        size,
        CHUNK_LEAVES,
        (start, end) => readStreamChunk(reads, this.chunkSource, this.retry.limits, tenantId, start, end),
        fresh,
      );
      for (let round = 0; round < CHUNKS_PER_ROUND && !this.loop.stopped; round += 1) {
        const next = ahead.next();
        if (!next) break;
        const chunk = await next;
        ahead.fill(READ_AHEAD_CHUNKS);
        // The chunks read ahead are not needed after a failure: the next pass reads again from the position.
        const outcome = await this.sendChunk(tenantId, chunk);
        if (outcome.kind === 'lost' || outcome.kind === 'failed') return outcome;
        progress = true;
        position = chunk.end + 1;
      }
      if (ahead.queued > 0 && !this.loop.stopped) this.readAhead = ahead;
      positions.set(tenantId, position);
    }
    return { kind: progress && !this.loop.stopped ? 'progress' : 'idle', trails: { sizes, positions } };
  }

  /** Sends a chunk's batches in order, the position moving past each one the destination accepts. */
  private async sendChunk(tenantId: string, chunk: Chunk): Promise<{ kind: 'moved' } | Extract<PassOutcome, { kind: 'lost' | 'failed' }>> {
    const { db, owner } = this.options;
    const metrics = this.series;
    if (chunk.end < chunk.start) return { kind: 'moved' };
    for (const batch of chunk.batches) {
      const outcome = await this.destination.send(batch.encoded, this.stopping.signal);
      // The batch before's position was committed while this one was in flight; it holds before this one's.
      if (!(await this.settlePosition())) return { kind: 'lost' };
      if (outcome.kind !== 'delivered') return { kind: 'failed', outcome };
      // Accepted: the position moves past it while the next batch goes (a crash now repeats both, skips neither).
      const update = advancePosition(db, this.stream.id, owner, tenantId, batch.encoded.lastLeaf + 1, batch.events);
      // Awaited by the next settlePosition; a rejection must not go unhandled meanwhile.
      update.catch(() => undefined);
      this.positionInFlight = update;
      const delivered = afterDelivered(this.retry);
      this.retry = delivered.state;
      if (delivered.recovered) streamRecovered(this.options, this.stream);
      metrics?.eventsDelivered.inc({ stream: this.stream.id }, batch.events);
    }
    if (chunk.batches.length === 0) {
      // Every event of the chunk filtered out: the position moves past it all the same, after the one before.
      if (!(await this.settlePosition())) return { kind: 'lost' };
      if (!(await advancePosition(db, this.stream.id, owner, tenantId, chunk.end + 1, 0))) return { kind: 'lost' };
    }
    return { kind: 'moved' };
  }

  /** Cuts the sleep short: a new revision. */
  wake(): void {
    this.loop.wake();
  }
}
