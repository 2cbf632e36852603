import type { ConsumerInfo, JetStreamManager, StreamInfo } from '@nats-io/jetstream';
import type { Queryable } from '../db/database.ts';
import { releaseLostPublications } from './deliveryOutbox.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { deliveryMetrics } from './deliveryMetrics.ts';

export interface LostPublicationsOptions {
  readonly db: Queryable;
  readonly jsm: JetStreamManager;
  readonly stream: string;
  readonly consumer: string;
  /** How often to look; recovery takes at most about two of these plus publishLagMs. */
  readonly intervalMs: number;
  /**
   * The longest a relay takes from marking a delivery published to JetStream's answer (its publish timeout):
   * a delivery marked this long before a sample has its message in the stream by the time of the sample.
   */
  readonly publishLagMs: number;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  readonly clock?: Clock;
}

/**
 * Messages whose consumer has acknowledged everything up to them, or that have sat delivered and
 * unacknowledged this long (below): the one exception, a message held forever, is another deployment's
 * message left for its owner (strayMessages.ts), which keeps the consumer's ack floor where it is.
 */
const STUCK_AFTER_MS = 5 * 60_000;
/** Samples kept while the ack floor does not move; beyond this the oldest are dropped (newer ones cover them). */
const MAX_SAMPLES = 1_000;

/** Where the stream ended at a moment: every delivery marked published before `publishedBefore` has its message at or below `lastSeq`. */
interface Sample {
  readonly publishedBefore: Date;
  readonly lastSeq: number;
  /** The stream's creation time: a stream created again (or a NATS that lost its store) starts its sequences anew. */
  readonly streamCreated: string;
  readonly takenAt: number;
}

/**
 * Finds deliveries marked published whose message is no longer in JetStream, and makes them due again so
 * that the relay publishes them anew. A message is lost when a relay dies (or loses Postgres) between marking
 * a delivery and publishing it or putting it back, or when NATS loses it or the consumer's record of it
 * (NATS 2.9 restarted after `kill -9` can come back with an ack floor past messages it never delivered).
 *
 * A delivery's message is not looked up one by one (JetStream cannot find a message by its id); instead, the
 * sweep notes where the stream ends at each look, and once the durable consumer's ack floor has passed that
 * point, every message published before it has been acknowledged: a delivery marked before then and still
 * waiting for its message has none. This never republishes a message that is only waiting in a backed-up
 * stream or held by a worker (the ack floor is behind it), so a backlog cannot turn into a storm of
 * republications; recovery takes about two sweep intervals plus publishLagMs once the messages before the
 * lost one have been consumed.
 */
export class LostPublications {
  private readonly options: LostPublicationsOptions;
  private readonly clock: Clock;
  private samples: Sample[] = [];
  private nextSweepAt = 0;

  constructor(options: LostPublicationsOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
  }

  /** Milliseconds until the next look is due (0 or less: now). */
  untilNextSweepMs(): number {
    return this.nextSweepAt - this.clock.now();
  }

  /**
   * Looks once the interval has passed since the last look, and returns how many deliveries it made due
   * again; throws when NATS or Postgres cannot be asked.
   */
  async sweepIfDue(): Promise<number> {
    if (this.clock.now() < this.nextSweepAt) return 0;
    this.nextSweepAt = this.clock.now() + this.options.intervalMs;
    const { jsm, stream, consumer } = this.options;
    const [streamInfo, consumerInfo] = await Promise.all([jsm.streams.info(stream), jsm.consumers.info(stream, consumer)]);
    const { now, released } = await releaseLostPublications(this.options.db, this.consumedBefore(streamInfo, consumerInfo));
    if (released > 0) {
      deliveryMetrics(this.options.metrics).republished.inc(released);
      this.options.log.warn({ released }, 'republishing deliveries whose JetStream message was lost');
    }
    // The stream's end is read after the database's clock: a delivery marked before `now` minus the publish
    // lag was in the stream by then.
    const after = await jsm.streams.info(stream);
    this.samples.push({
      publishedBefore: new Date(now.getTime() - this.options.publishLagMs),
      lastSeq: after.state.last_seq,
      streamCreated: after.created,
      takenAt: this.clock.now(),
    });
    if (this.samples.length > MAX_SAMPLES) this.samples.shift();
    return released;
  }

  /**
   * The latest time before which every published delivery's message has been consumed, or undefined. Samples
   * it is taken from (and older ones) are used up: their deliveries are released now.
   */
  private consumedBefore(stream: StreamInfo, consumer: ConsumerInfo): Date | undefined {
    let used = -1;
    this.samples.forEach((sample, index) => {
      if (sample.streamCreated !== stream.created) {
        used = index;
        return;
      }
      // Sequences at or below the stream's current end; above it (a NATS that lost the stream's tail), gone.
      const end = Math.min(sample.lastSeq, stream.state.last_seq);
      const acknowledged = consumer.ack_floor.stream_seq >= end;
      const stuck = this.clock.now() - sample.takenAt >= STUCK_AFTER_MS && consumer.delivered.stream_seq >= end;
      if (acknowledged || stuck) used = index;
    });
    if (used < 0) return undefined;
    const cutoff = this.samples[used]!.publishedBefore;
    this.samples = this.samples.slice(used + 1);
    return cutoff;
  }
}
