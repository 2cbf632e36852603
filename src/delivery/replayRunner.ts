import type pg from 'pg';
import type { Database } from '../db/database.ts';
import {
  inFlightElsewhere,
  pendingDeliveries,
  releaseReplay,
  replayChunk,
  runningReplayEndpoint,
  runningReplayIds,
  tryClaimReplay,
} from './replayStore.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import { coerceError } from '../platform/errors.ts';
import { PollLoop } from '../platform/pollLoop.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { nextReplayStep, pendingCap, type ReplayLimits } from './replayThrottle.ts';

export interface ReplayRunnerOptions {
  readonly db: Database;
  /**
   * How often running replays are looked for while none is seen: a new one is announced (wake()), so this
   * only bounds how late one whose notification was missed starts. While one runs elsewhere, every second,
   * so that this process takes it over soon after that one stops.
   */
  readonly pollMs: number;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  /** Events scanned per transaction, at most. */
  readonly chunkSize?: number;
  /** A replay keeps at most this many of its endpoint's deliveries pending (fewer beside live traffic). */
  readonly maxPendingPerEndpoint?: number;
  /** Replays run at once by this process, each on a connection of its own. */
  readonly concurrency?: number;
  readonly clock?: Clock;
}

const DEFAULT_CHUNK_SIZE = 500;
/**
 * How many of its endpoint's deliveries a replay keeps pending. Every one of them can be queued ahead of a
 * live delivery (in the relay, JetStream and the worker, all first in, first out), so while other endpoints
 * have deliveries in flight a replay keeps few; alone it keeps enough to keep a worker busy. A fixed cap
 * raised live deliveries' p99 at half the peak rate, and a larger one made the replay no faster while what
 * it queued sat ahead of the first live deliveries (bench/replay.ts; BENCHMARKS.md, "Issue 17's replay goals").
 */
const DEFAULT_MAX_PENDING = 1_000;
const DEFAULT_CONCURRENCY = 2;
/** How often replays are looked for while one is running somewhere (see pollMs). */
const BUSY_POLL_MS = 1_000;
const ERROR_BACKOFF_MS = 1_000;

/**
 * Runs replays (docs/webhooks.md "Replay"), in the relay role: it already owns the outbox's due side, and
 * a replay is outbox work. Any number of relays may run; each replay is run by the one process holding its
 * advisory lock (replayStore.tryClaimReplay), taken over at once by another when that process dies.
 *
 * Throttled so that live deliveries keep their latency (replayThrottle.ts decides; this class counts and
 * carries it out): a replay to a slow receiver waits for it instead of filling the queue.
 */
export class ReplayRunner {
  private readonly options: ReplayRunnerOptions;
  private readonly limits: ReplayLimits;
  private readonly concurrency: number;
  private readonly clock: Clock;
  private readonly running = new Map<string, Promise<void>>();
  private readonly loop: PollLoop;
  private liveTrafficSeenAt = 0;

  constructor(options: ReplayRunnerOptions) {
    this.options = options;
    this.limits = { chunkSize: options.chunkSize ?? DEFAULT_CHUNK_SIZE, maxPending: options.maxPendingPerEndpoint ?? DEFAULT_MAX_PENDING };
    this.concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
    this.clock = options.clock ?? systemClock;
    this.loop = new PollLoop({
      pass: () => this.lookForWork(),
      onError: (error) => {
        this.options.log.warn({ err: error }, 'could not look for replays; retrying');
        this.options.metrics.errors.inc({ kind: 'replay_failed' });
        return this.options.pollMs;
      },
    });
  }

  start(): void {
    this.loop.start();
  }

  /** A replay was created (a notification said so): look for it now. */
  wake(): void {
    this.loop.wake();
  }

  /** Stops after the chunk in progress commits; the replays stay running for the next process. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await Promise.allSettled([...this.running.values()]);
  }

  private async lookForWork(): Promise<number> {
    const ids = await runningReplayIds(this.options.db);
    for (const id of ids) {
      if (this.running.size >= this.concurrency) break;
      if (this.running.has(id)) continue;
      await this.tryRun(id);
    }
    return ids.length > 0 ? Math.min(BUSY_POLL_MS, this.options.pollMs) : this.options.pollMs;
  }

  /** Claims the replay on a connection of its own and runs it there, unless another process has it. */
  private async tryRun(replayId: string): Promise<void> {
    const session = await this.options.db.connect();
    let claimed = false;
    try {
      claimed = await tryClaimReplay(session, replayId);
    } finally {
      if (!claimed) session.release();
    }
    if (!claimed) return;
    const run = this.run(replayId, session).finally(() => this.running.delete(replayId));
    this.running.set(replayId, run);
  }

  private async run(replayId: string, session: pg.PoolClient): Promise<void> {
    const log = this.options.log.child({ replay_id: replayId });
    log.info('replay started');
    let broken: Error | undefined;
    try {
      while (!this.loop.stopped) {
        const endpointId = await runningReplayEndpoint(session, replayId);
        if (endpointId === undefined) break;
        // Tops the endpoint's pending deliveries up to the cap, a chunk at a time; live traffic lowers the cap.
        const now = (await inFlightElsewhere(session, endpointId, 1)) > 0;
        const { cap, seenAtMs } = pendingCap(this.limits, { nowMs: this.clock.now(), seenAtMs: this.liveTrafficSeenAt, now });
        this.liveTrafficSeenAt = seenAtMs;
        const step = nextReplayStep(this.limits, cap, await pendingDeliveries(session, endpointId, cap));
        if (step.kind === 'wait') {
          await this.loop.sleep(step.ms);
          continue;
        }
        let status: string;
        try {
          status = await this.inTransaction(session, () => replayChunk(session, replayId, step.size).then((result) => result.status));
        } catch (thrown) {
          log.warn({ err: coerceError(thrown) }, 'replay chunk failed; trying again');
          this.options.metrics.errors.inc({ kind: 'replay_failed' });
          // A lost connection ends the run (the outer catch): the lock went with it.
          await session.query('SELECT 1');
          await this.loop.sleep(ERROR_BACKOFF_MS);
          continue;
        }
        if (status !== 'running') {
          log.info({ status }, 'replay finished');
          break;
        }
      }
    } catch (thrown) {
      broken = coerceError(thrown);
      log.warn({ err: broken }, 'replay interrupted; it continues from its position at the next look');
      this.options.metrics.errors.inc({ kind: 'replay_failed' });
    } finally {
      // A connection that failed is destroyed, which also drops the lock; a healthy one gives it back.
      if (!broken) await releaseReplay(session, replayId).catch((thrown: unknown) => (broken = coerceError(thrown)));
      session.release(broken);
    }
  }

  private async inTransaction<T>(session: pg.PoolClient, work: () => Promise<T>): Promise<T> {
    await session.query('BEGIN');
    try {
      const result = await work();
      await session.query('COMMIT');
      return result;
    } catch (thrown) {
      await session.query('ROLLBACK');
      throw thrown;
    }
  }
}
