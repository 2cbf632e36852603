import type { JetStreamManager, StreamInfo } from '@nats-io/jetstream';
import type { Queryable } from '../db/database.ts';
import { releaseLostPublications } from './deliveryOutbox.ts';
import { consumedBefore, withSample, type Sample, type StreamPosition } from './lostPublicationSamples.ts';
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
  private samples: readonly Sample[] = [];
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
    const consumed = consumedBefore(
      this.samples,
      positionOf(streamInfo),
      { ackFloorSeq: consumerInfo.ack_floor.stream_seq, deliveredSeq: consumerInfo.delivered.stream_seq },
      this.clock.now(),
    );
    this.samples = consumed.samples;
    const { now, released } = await releaseLostPublications(this.options.db, consumed.cutoff);
    if (released > 0) {
      deliveryMetrics(this.options.metrics).republished.inc(released);
      this.options.log.warn({ released }, 'republishing deliveries whose JetStream message was lost');
    }
    // The stream's end is read after the database's clock (lostPublicationSamples.ts withSample).
    const after = positionOf(await jsm.streams.info(stream));
    this.samples = withSample(this.samples, {
      databaseNow: now,
      publishLagMs: this.options.publishLagMs,
      stream: after,
      nowMs: this.clock.now(),
    });
    return released;
  }
}

function positionOf(info: StreamInfo): StreamPosition {
  return { created: info.created, lastSeq: info.state.last_seq };
}
