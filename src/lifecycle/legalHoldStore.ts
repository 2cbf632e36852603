import type { Queryable } from '../db/database.ts';

/** The SQL of legal holds (migrations/019_legal_holds.sql); see retentionStore.ts for why it is kept in one place. */

export interface LegalHoldRecord {
  readonly id: string;
  readonly tenantId: string;
  readonly since: Date | null;
  readonly until: Date | null;
  readonly actionPrefixes: readonly string[];
  readonly reason: string;
  readonly reference: string;
  readonly managedBy: string;
  readonly placedAt: Date;
  readonly releasedAt: Date | null;
  readonly releasedBy: string | null;
}

interface HoldRow {
  id: string;
  tenant_id: string;
  since: Date | null;
  until: Date | null;
  action_prefixes: string[];
  reason: string;
  reference: string;
  managed_by: string;
  placed_at: Date;
  released_at: Date | null;
  released_by: string | null;
  [column: string]: unknown;
}

const COLUMNS = 'id, tenant_id, since, until, action_prefixes, reason, reference, managed_by, placed_at, released_at, released_by';

function toRecord(row: HoldRow): LegalHoldRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    since: row.since,
    until: row.until,
    actionPrefixes: row.action_prefixes,
    reason: row.reason,
    reference: row.reference,
    managedBy: row.managed_by,
    placedAt: row.placed_at,
    releasedAt: row.released_at,
    releasedBy: row.released_by,
  };
}

export type NewLegalHold = Pick<
  LegalHoldRecord,
  'id' | 'tenantId' | 'since' | 'until' | 'actionPrefixes' | 'reason' | 'reference' | 'managedBy'
>;

/** Places a hold; undefined when the resource placed one already (find it with findManagedLegalHold). */
export async function insertLegalHold(db: Queryable, hold: NewLegalHold): Promise<LegalHoldRecord | undefined> {
  const { rows } = await db.query<HoldRow>(
    `INSERT INTO legal_holds (id, tenant_id, since, until, action_prefixes, reason, reference, managed_by)
     VALUES ($1, $2, $3::timestamptz, $4::timestamptz, $5::text[], $6, $7, $8)
     ON CONFLICT (managed_by) DO NOTHING
     RETURNING ${COLUMNS}`,
    [hold.id, hold.tenantId, hold.since, hold.until, hold.actionPrefixes, hold.reason, hold.reference, hold.managedBy],
  );
  return rows[0] ? toRecord(rows[0]) : undefined;
}

export async function findManagedLegalHold(db: Queryable, managedBy: string, forUpdate = false): Promise<LegalHoldRecord | undefined> {
  const { rows } = await db.query<HoldRow>(`SELECT ${COLUMNS} FROM legal_holds WHERE managed_by = $1${forUpdate ? ' FOR UPDATE' : ''}`, [
    managedBy,
  ]);
  return rows[0] ? toRecord(rows[0]) : undefined;
}

/** Releases a hold in place; the record as released. */
export async function releaseLegalHold(db: Queryable, id: string, releasedBy: string): Promise<LegalHoldRecord> {
  const { rows } = await db.query<HoldRow>(
    `UPDATE legal_holds SET released_at = now(), released_by = $2 WHERE id = $1 AND released_at IS NULL RETURNING ${COLUMNS}`,
    [id, releasedBy],
  );
  return toRecord(rows[0]!);
}

/** Holds, newest first: of one tenant or all, in place only or with the released ones. */
export async function listLegalHolds(
  db: Queryable,
  options: { readonly tenantId?: string; readonly includeReleased: boolean },
): Promise<LegalHoldRecord[]> {
  const { rows } = await db.query<HoldRow>(
    `SELECT ${COLUMNS} FROM legal_holds
      WHERE ($1::text IS NULL OR tenant_id = $1) AND ($2::boolean OR released_at IS NULL)
      ORDER BY placed_at DESC, id DESC`,
    [options.tenantId ?? null, options.includeReleased],
  );
  return rows.map(toRecord);
}
