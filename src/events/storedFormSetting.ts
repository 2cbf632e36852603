import type { Queryable } from '../db/database.ts';
import { SQLSTATE, sqlState } from '../db/sqlstate.ts';
import { type Clock, systemClock } from '../platform/clock.ts';

/**
 * Which form writers store events in (migration 026, docs/operations.md "How events are stored"): `compact`,
 * each event once, or `full`, the columns and the document, which pods of releases before 026 can read.
 */
export type StoredForm = 'compact' | 'full';

/**
 * How long a writer keeps the form it read. `audit-trail events compact` switches the database to compact,
 * then waits this long (and a margin) before rewriting old rows, so that every writer has switched.
 */
export const STORED_FORM_REFRESH_MS = 10_000;

/** The form the database asks writers to store, read at most once per STORED_FORM_REFRESH_MS. */
export class StoredFormSetting {
  private readonly db: Queryable;
  private readonly clock: Clock;
  private form: StoredForm | undefined;
  private readAtMs = 0;

  constructor(db: Queryable, clock: Clock = systemClock) {
    this.db = db;
    this.clock = clock;
  }

  async current(): Promise<StoredForm> {
    const now = this.clock.now();
    if (this.form === undefined || now - this.readAtMs >= STORED_FORM_REFRESH_MS) {
      this.form = await readStoredForm(this.db);
      this.readAtMs = now;
    }
    return this.form;
  }
}

async function readStoredForm(db: Queryable): Promise<StoredForm> {
  try {
    const { rows } = await db.query<{ form: StoredForm }>('SELECT form FROM event_storage');
    return rows[0]?.form ?? 'full';
  } catch (error) {
    // A database not migrated to 026 yet has neither the setting nor the compact form's column.
    if (sqlState(error) === SQLSTATE.undefinedTable) return 'full';
    throw error;
  }
}

/** Switches writers to the compact form (they follow within STORED_FORM_REFRESH_MS); true if it was full. */
export async function switchToCompactForm(db: Queryable): Promise<boolean> {
  const { rowCount } = await db.query(`UPDATE event_storage SET form = 'compact', since = now() WHERE form = 'full'`);
  return (rowCount ?? 0) > 0;
}
