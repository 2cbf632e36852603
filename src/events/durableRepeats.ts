import type { Queryable } from '../db/database.ts';

/**
 * Returns once every event already stored is as durable as a write now would make it: for a batch whose events
 * were all or partly there already (a producer's retry, a redelivered JetStream message), before it is
 * acknowledged.
 *
 * A commit waiting for a synchronous standby (synchronous_standby_names) whose session ends meanwhile (the
 * backend terminated, its wait cancelled) stays committed on the primary alone and becomes visible there. The
 * producer saw an error and retries; the retry finds its events stored, and answering it "duplicate" at once
 * would acknowledge what a failover before the standby confirms still loses. A statement that inserts nothing
 * writes no WAL, and Postgres makes only a commit that wrote WAL wait for the standbys; this one locks a row
 * (migration 032), which is written to WAL, so its commit waits like any write's, for WAL up to a point after
 * the first copy's commit. Without synchronous standbys it costs a local WAL flush, and only on repeats.
 */
export async function awaitDurableRepeats(db: Queryable): Promise<void> {
  const { rowCount } = await db.query('SELECT id FROM durability_mark FOR KEY SHARE');
  // Without its row the lock writes nothing, and the repeat would be acknowledged without the wait: loudly, not that.
  if (rowCount !== 1) throw new Error('durability_mark has lost its row (migration 032 inserts it): repeats cannot be made durable');
}
