import type { Queryable } from '../db/database.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { DueDelivery } from './deliveryOutbox.ts';
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
 */

/** Marks the publications JetStream acknowledged. One statement for the batch; a row published again since is left alone. */
async function confirmPublications(db: Queryable, published: readonly DueDelivery[]): Promise<void> {
  if (published.length === 0) return;
  // Rows locked in id order and skipped when locked: a worker settling one (locking deliveries by id) has it
  // done with, and waiting for it in another order could deadlock.
  await db.query(
    `UPDATE deliveries AS d SET confirmed_publication = c.publication
     FROM unnest($1::bigint[], $2::int[]) AS c(id, publication)
     WHERE d.id = c.id AND d.publications = c.publication AND d.state = 'pending'
       AND d.id IN (SELECT id FROM deliveries WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE SKIP LOCKED)`,
    [published.map((delivery) => delivery.id), published.map((delivery) => delivery.publication)],
  );
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
