import { hostname } from 'node:os';
import type { Database } from '../db/database.ts';
import { NotificationListener } from '../db/notificationListener.ts';
import { coerceError } from '../platform/errors.ts';
import { PollLoop } from '../platform/pollLoop.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import type { SecretBox } from '../webhooks/secretBox.ts';
import { ChunkPreparer } from './chunkPreparer.ts';
import { openDestination, type DestinationOptions } from './destinations/openDestination.ts';
import { destinationOf } from './streamSecrets.ts';
import { claimStreams, releaseStreams } from './streamLeaseStore.ts';
import { STREAMS_CHANGED_CHANNEL } from './streamStore.ts';
import { StreamWorker } from './streamWorker.ts';
import type { StreamStateNotices } from './streamStateNotices.ts';
import { streamMetrics } from './streamMetrics.ts';

export interface StreamRunnerOptions {
  readonly db: Database;
  /**
   * Where the streams read the trail (tree sizes, leaves, heads) when a read replica is configured
   * (db/replicaReads.ts): chosen once per pass, so that the leaves read are those below the sizes read.
   * Positions and leases are always written to the primary.
   */
  readonly reads?: { choose(): Promise<Database> };
  readonly secrets: SecretBox;
  readonly destinations: DestinationOptions;
  /** How often leases are renewed and new or changed streams noticed; also an idle stream's polling period. */
  readonly pollMs: number;
  /** A process that stops renewing loses its streams to the others after this. */
  readonly leaseMs: number;
  /** The most streams one process delivers. */
  readonly capacity: number;
  readonly failingRetryMs: number;
  /** Told of each stream turning failing and delivering again (StreamWorker). */
  readonly notices?: StreamStateNotices;
  readonly log: Logger;
  readonly metrics?: ServiceMetrics;
  /** The lease's name; by default the host name and the PID. */
  readonly identity?: string;
  /** For the LISTEN connection that hears of changed streams; without it, changes are noticed at the next poll. */
  readonly databaseUrl?: string;
}

/**
 * The `streams` role: holds leases on up to `capacity` streams (shared with the other processes of the
 * role through Postgres; a process that dies loses its leases after leaseMs) and runs one StreamWorker per
 * stream held. Every pollMs it renews the leases, takes streams whose lease ran out, starts workers for
 * new streams, restarts those whose stream changed (a new destination, a resume) and stops those it no
 * longer holds or that were paused or deleted; and at once when a stream changes (STREAMS_CHANGED_CHANNEL).
 */
export class StreamRunner {
  private readonly options: StreamRunnerOptions;
  private readonly owner: string;
  private readonly workers = new Map<string, StreamWorker>();
  /** Puts every held stream's batches together, on a thread of its own. */
  private readonly preparer = new ChunkPreparer();
  private readonly loop: PollLoop;
  /** Passes failed in a row. */
  private failures = 0;
  private readonly listener: NotificationListener | undefined;

  constructor(options: StreamRunnerOptions) {
    this.options = options;
    this.owner = options.identity ?? `${hostname()}-${process.pid}`;
    // The streams' families exported from the start, before any stream reports (main.ts declares them too).
    if (options.metrics) streamMetrics(options.metrics);
    this.loop = new PollLoop({
      pass: async () => {
        await this.pass();
        this.failures = 0;
        // Holding nothing, there are no leases to renew: new and changed streams are announced (the
        // listener), so only a stream another process stopped renewing is waited for, half a lease at most.
        // An idle deployment rests (BENCHMARKS.md, "An idle deployment").
        return this.workers.size > 0 ? this.options.pollMs : Math.max(this.options.pollMs, Math.floor(this.options.leaseMs / 2));
      },
      onError: (error) => {
        // Once per outage at warn: the pass is tried again every poll, ten times a second in tests.
        const level = this.failures === 0 ? 'warn' : 'debug';
        this.failures += 1;
        this.options.log[level]({ err: error, failures: this.failures }, 'streams: could not renew leases; will retry');
        return this.options.pollMs;
      },
    });
    // A change is a pass now; a missed notification (a reconnect) is one too, and the poll is the fallback.
    this.listener =
      options.databaseUrl === undefined
        ? undefined
        : new NotificationListener({
            databaseUrl: options.databaseUrl,
            channel: STREAMS_CHANGED_CHANNEL,
            name: 'audit-trail streams listener',
            log: options.log,
            onNotification: () => this.loop.wake(),
            onGap: () => this.loop.wake(),
          });
  }

  start(): void {
    // The preparer's thread loads its modules at once, not when the first backfill is waiting for it.
    this.preparer.start();
    this.loop.start();
    void this.listener?.start();
  }

  async stop(): Promise<void> {
    await this.listener?.stop();
    await this.loop.stop();
    await Promise.all([...this.workers.values()].map((worker) => worker.stop()));
    this.workers.clear();
    await this.preparer.close();
    // Handed back at once, so that another process carries on without waiting for the lease to run out.
    await releaseStreams(this.options.db, this.owner).catch((error: Error) =>
      this.options.log.warn({ err: error }, 'could not release the streams; they move on when their leases run out'),
    );
  }

  /** The streams this process delivers now. */
  get held(): string[] {
    return [...this.workers.keys()];
  }

  private async pass(): Promise<void> {
    const { db, leaseMs, capacity } = this.options;
    const held = await claimStreams(db, this.owner, leaseMs, capacity);
    if (this.loop.stopped) return;
    const ids = new Set(held.map((stream) => stream.id));
    for (const [id, worker] of this.workers) {
      if (ids.has(id) && !worker.done) continue;
      this.workers.delete(id);
      await worker.stop();
    }
    for (const stream of held) {
      const current = this.workers.get(stream.id);
      if (current && current.stream.revision === stream.revision) continue;
      if (current) await current.stop();
      let worker: StreamWorker;
      try {
        const { destination, signingSecret } = destinationOf(stream, this.options.secrets);
        worker = new StreamWorker(
          stream,
          openDestination(destination, signingSecret, this.options.destinations, stream.format),
          destination,
          {
            db,
            reads: this.options.reads,
            preparer: this.preparer,
            owner: this.owner,
            pollMs: this.options.pollMs,
            failingRetryMs: this.options.failingRetryMs,
            log: this.options.log,
            metrics: this.options.metrics,
            notices: this.options.notices,
          },
        );
      } catch (thrown) {
        // A secret sealed under another SECRET_ENCRYPTION_KEY, say: the stream waits for the right key.
        this.options.log.error({ err: coerceError(thrown), stream_id: stream.id }, 'cannot open the stream destination');
        continue;
      }
      this.workers.set(stream.id, worker);
      worker.start();
    }
  }
}
