import { prepared, type Queryable } from '../db/database.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { DueDelivery } from './deliveryOutbox.ts';
import { PUBLISH_TIMEOUT_MS } from './deliveryMessage.ts';
import { wakeRelaysIfAny } from './relayWakeUp.ts';

/**
 * Publications JetStream acknowledged, and those it never got (migration 022). A delivery is marked
 * published before its message is published (a worker receiving the message must find the row marked), so
 * a publisher that dies in between (an ingest pod or a relay killed, or losing Postgres) leaves a delivery
 * marked published with no message anywhere. Publishers confirm each publication JetStream acknowledged;
 * the relays' sweep makes due again, within a fixed time, the deliveries whose current publication stayed
 * unconfirmed. Unlike the ack-floor sweep (lostPublications.ts), this does not wait for the consumer to
 * have acknowledged everything before the loss, which any other fault (a worker killed holding messages, a
 * NATS or Postgres restart, a hung endpoint) holds back: its bound depends on nothing but the clock.
 *
 * A confirmation that is itself lost (the publisher dies after JetStream's answer, or Postgres refuses the
 * write) makes the delivery look lost: it is published once more, and the worker's attempt check makes the
 * second message harmless when the first was handled, so a delivery may then be sent twice, never more.
 *
 * Publishers confirm late (DeferredConfirmations): a confirmation only matters to a delivery still in flight
 * when the sweep looks, and most are handled by a worker within seconds, its outcome clearing the mark. A
 * confirmation written at once cost every delivery a row version (with its index entries) and a row lock, a
 * third of the delivery path's Postgres time (BENCHMARKS.md, "Where the delivery path's CPU goes").
 */

/** A publication unconfirmed this long after it was marked is lost (the relays' sweep): JetStream answers within the publish timeout; the margin is the confirmation's. */
export const UNCONFIRMED_AFTER_MS = PUBLISH_TIMEOUT_MS + 5_000;

/**
 * How long after its publish began a publication is confirmed, if its delivery is still in flight then: half
 * the margin the sweep leaves after the publish timeout, so that a confirmation written late (a busy Postgres)
 * still lands before the sweep would count its delivery lost.
 */
export const CONFIRM_AFTER_MS = PUBLISH_TIMEOUT_MS + (UNCONFIRMED_AFTER_MS - PUBLISH_TIMEOUT_MS) / 2;

/**
 * Marks the publications JetStream acknowledged whose deliveries are still in flight. One statement for the
 * batch; a row published again since, or no longer in flight (an outcome recorded, the row handed back), is
 * neither locked nor written.
 */
async function confirmPublications(db: Queryable, published: readonly DueDelivery[]): Promise<void> {
  if (published.length === 0) return;
  // Rows locked in id order and skipped when locked: a worker settling one (locking deliveries by id) has it
  // done with, and waiting for it in another order could deadlock. Each row is found by its primary key, the
  // ids in ascending order (the nested loop follows the array): joined as a set, Postgres read the whole
  // in-flight index, every entry of a row no longer in flight included, for a batch of a few hundred.
  // The locked rows are materialised once and the update joins them. Written as `id IN (the locking
  // subquery)`, a plan Postgres may pick (the generic one, guessing ten rows for an array) ran the subquery
  // again for every row still in flight: 2,000 in flight took 3.6 s and 2,001,000 row locks, quadratic in
  // the very backlog (a worker behind) that confirmations are for; the delivery benchmark saw one call take
  // 3.4 s. This form is linear whichever plan is used (test/webhooks/publication-confirmations.test.ts).
  const sorted = [...published].sort((a, b) => compareIds(a.id, b.id));
  await db.query(
    prepared(
      `WITH locked AS MATERIALIZED (
       SELECT l.id, w.publication
       FROM unnest($1::bigint[], $2::int[]) AS w(id, publication)
       CROSS JOIN LATERAL (SELECT id FROM deliveries
                           WHERE id = w.id AND publications = w.publication
                             AND state = 'pending' AND published_at IS NOT NULL
                           OFFSET 0) AS l
       FOR UPDATE OF l SKIP LOCKED
     )
     UPDATE deliveries AS d SET confirmed_publication = locked.publication
     FROM locked
     WHERE d.id = locked.id`,
      [sorted.map((delivery) => delivery.id), sorted.map((delivery) => delivery.publication)],
    ),
  );
}

/** Bigint ids as text, in numeric order. */
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** confirmPublications for a publisher: a confirmation that fails is logged, and costs at most a second message. */
export async function confirmPublished(db: Queryable, published: readonly DueDelivery[], log: Logger): Promise<void> {
  await confirmPublications(db, published).catch((thrown: unknown) =>
    log.warn(
      { err: coerceError(thrown), deliveries: published.length },
      'could not confirm published deliveries; they will be published once more',
    ),
  );
}

/**
 * A publisher's confirmations, each written CONFIRM_AFTER_MS after its publish began (and only for the
 * deliveries still in flight then), one statement for every batch due at once. Writes are serialised;
 * flush() writes whatever waits (a stopping publisher). Confirmations still waiting when a process dies are
 * lost like any other: their deliveries, if still in flight, are published once more.
 */
export class DeferredConfirmations {
  private readonly db: Queryable;
  private readonly log: Logger;
  private readonly clock: Clock;
  private waiting: Array<{ readonly dueAt: number; readonly published: readonly DueDelivery[] }> = [];
  private cancelTimer: (() => void) | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(options: { readonly db: Queryable; readonly log: Logger; readonly clock?: Clock }) {
    this.db = options.db;
    this.log = options.log;
    this.clock = options.clock ?? systemClock;
  }

  /** Deliveries JetStream acknowledged, whose publish began at `publishStartedAt` (epoch ms). */
  add(published: readonly DueDelivery[], publishStartedAt: number): void {
    if (published.length === 0) return;
    this.waiting.push({ dueAt: publishStartedAt + CONFIRM_AFTER_MS, published });
    if (!this.cancelTimer) this.arm();
  }

  /** Writes every confirmation waiting, due or not, and waits for the writes under way. */
  async flush(): Promise<void> {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.writeDue(Number.POSITIVE_INFINITY);
    await this.writing;
  }

  private arm(): void {
    if (this.waiting.length === 0) return;
    // Publishes answered out of order (a publisher has several under way) are added out of order.
    const nextDueAt = this.waiting.reduce((earliest, entry) => Math.min(earliest, entry.dueAt), Number.POSITIVE_INFINITY);
    this.cancelTimer = this.clock.setTimer(
      () => {
        this.cancelTimer = undefined;
        this.writeDue(this.clock.now());
        this.arm();
      },
      Math.max(0, nextDueAt - this.clock.now()),
    );
  }

  /** Starts writing, after the writes under way, the confirmations due by `until`. */
  private writeDue(until: number): void {
    const due = this.waiting.filter((entry) => entry.dueAt <= until);
    if (due.length === 0) return;
    this.waiting = this.waiting.filter((entry) => entry.dueAt > until);
    const published = due.flatMap((entry) => entry.published);
    this.writing = this.writing.then(() => confirmPublished(this.db, published, this.log));
  }
}

/**
 * Makes due again the deliveries marked published more than `olderThanMs` ago whose publication nobody
 * confirmed, and wakes the relays when there are any. Returns how many, and how many deliveries are in
 * flight besides (marked published, not yet settled: the only ones a later sweep could find lost, until
 * something is published again). Reads only the deliveries in flight (the deliveries_in_flight index): few,
 * unless workers are behind.
 */
export async function releaseUnconfirmedPublications(db: Queryable, olderThanMs: number): Promise<{ released: number; inFlight: number }> {
  const { rows } = await db.query<{ released: number; in_flight: number }>(
    `WITH released AS (
       UPDATE deliveries SET published_at = NULL
       WHERE state = 'pending' AND published_at IS NOT NULL
         AND published_at < now() - make_interval(secs => $1::double precision / 1000)
         AND confirmed_publication IS DISTINCT FROM publications
       RETURNING 1
     )
     SELECT count(*)::int AS released, ${wakeRelaysIfAny('released', 'old due times')} AS notified,
            (SELECT count(*)::int FROM deliveries WHERE state = 'pending' AND published_at IS NOT NULL) AS in_flight
     FROM released`,
    [olderThanMs],
  );
  return { released: rows[0]?.released ?? 0, inFlight: rows[0]?.in_flight ?? 0 };
}
