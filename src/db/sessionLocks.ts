import type pg from 'pg';
import { coerceError } from '../platform/errors.ts';
import { translateUnavailable, type Database } from './database.ts';

/**
 * The seed of hashtextextended for the controller's locks on the resources it reconciles, so that their keys
 * never meet another use of advisory locks in the service (7301: webhook endpoints per tenant, 7302: replays).
 */
export const CONTROLLED_RESOURCE_LOCKS = 7303;

export type LockOutcome<T> = { readonly held: true; readonly value: T } | { readonly held: false };

/**
 * Session-level advisory locks keyed by text, each held on a pooled connection of its own for as long as the
 * work under it runs, whatever that work does elsewhere (the Kubernetes API, other connections). A process
 * that dies loses its connection and with it the lock: nothing stale to wait out. A lock another session
 * holds is not waited for: the caller comes back later.
 */
export class SessionLocks {
  private readonly db: Database;
  private readonly space: number;

  constructor(db: Database, space: number) {
    this.db = db;
    this.space = space;
  }

  async withLock<T>(key: string, work: () => Promise<T>): Promise<LockOutcome<T>> {
    const session = await this.db.connect();
    let broken: Error | undefined;
    try {
      const locked = await this.tryLock(session, key).catch((error: unknown) => {
        broken = coerceError(error);
        throw translateUnavailable(error);
      });
      if (!locked) return { held: false };
      try {
        return { held: true, value: await work() };
      } finally {
        // A lock that cannot be released goes with its connection, which is destroyed rather than pooled.
        await session
          .query('SELECT pg_advisory_unlock(hashtextextended($1::text, $2::bigint))', [key, this.space])
          .catch((error: unknown) => (broken = coerceError(error)));
      }
    } finally {
      session.release(broken);
    }
  }

  private async tryLock(session: pg.PoolClient, key: string): Promise<boolean> {
    const { rows } = await session.query<{ locked: boolean }>(
      'SELECT pg_try_advisory_lock(hashtextextended($1::text, $2::bigint)) AS locked',
      [key, this.space],
    );
    return rows[0]!.locked;
  }
}
