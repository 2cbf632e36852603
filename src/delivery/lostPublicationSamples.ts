/**
 * The decisions of the lost-publication sweep (lostPublications.ts), without I/O: which of the samples taken
 * at earlier looks the consumer has passed, and so before when every published delivery's message has been
 * consumed. The sweep reads JetStream and Postgres and hands their answers in, with the time; its tests need
 * neither.
 *
 * - A sample is passed when the consumer's ack floor reached the stream's end as the sample saw it (or the
 *   stream's end now, when NATS lost the stream's tail: sequences above it are gone).
 * - A sample STUCK_AFTER_MS old is passed when the consumer has delivered up to that end, even unacknowledged:
 *   one message held forever (another deployment's, left for its owner) must not stop the sweep for good.
 * - A sample of another stream (created again, or a NATS that lost its store) is passed: its sequences mean
 *   nothing any more.
 * - The newest sample passed gives the cutoff; it and every older one are used up.
 * - At most MAX_SAMPLES are kept while the ack floor does not move; the oldest go first.
 */

/** Messages sat delivered and unacknowledged this long count as consumed. */
export const STUCK_AFTER_MS = 5 * 60_000;
/** Samples kept while the ack floor does not move; beyond this the oldest are dropped (newer ones cover them). */
export const MAX_SAMPLES = 1_000;

/** Where the stream ended at a moment: every delivery marked published before `publishedBefore` has its message at or below `lastSeq`. */
export interface Sample {
  readonly publishedBefore: Date;
  readonly lastSeq: number;
  /** The stream's creation time: a stream created again starts its sequences anew. */
  readonly streamCreated: string;
  readonly takenAt: number;
}

/** What the sweep reads of the stream and of its durable consumer. */
export interface StreamPosition {
  readonly created: string;
  readonly lastSeq: number;
}

export interface ConsumerPosition {
  /** Every message up to this sequence is acknowledged. */
  readonly ackFloorSeq: number;
  /** Every message up to this sequence has been delivered. */
  readonly deliveredSeq: number;
}

/**
 * The latest time before which every published delivery's message has been consumed (undefined: none yet),
 * and the samples still waiting.
 */
export function consumedBefore(
  samples: readonly Sample[],
  stream: StreamPosition,
  consumer: ConsumerPosition,
  nowMs: number,
): { readonly cutoff: Date | undefined; readonly samples: readonly Sample[] } {
  let used = -1;
  samples.forEach((sample, index) => {
    if (sample.streamCreated !== stream.created) {
      used = index;
      return;
    }
    const end = Math.min(sample.lastSeq, stream.lastSeq);
    const acknowledged = consumer.ackFloorSeq >= end;
    const stuck = nowMs - sample.takenAt >= STUCK_AFTER_MS && consumer.deliveredSeq >= end;
    if (acknowledged || stuck) used = index;
  });
  if (used < 0) return { cutoff: undefined, samples };
  return { cutoff: samples[used]!.publishedBefore, samples: samples.slice(used + 1) };
}

/**
 * The samples after one more look: the stream's end read after the database's clock (`databaseNow`), so a
 * delivery marked before that time less the publish lag was in the stream by then.
 */
export function withSample(
  samples: readonly Sample[],
  look: { readonly databaseNow: Date; readonly publishLagMs: number; readonly stream: StreamPosition; readonly nowMs: number },
): readonly Sample[] {
  const sample: Sample = {
    publishedBefore: new Date(look.databaseNow.getTime() - look.publishLagMs),
    lastSeq: look.stream.lastSeq,
    streamCreated: look.stream.created,
    takenAt: look.nowMs,
  };
  const next = [...samples, sample];
  return next.length > MAX_SAMPLES ? next.slice(next.length - MAX_SAMPLES) : next;
}
