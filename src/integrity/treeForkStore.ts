import type { Queryable } from '../db/database.ts';
import type { ForkVerdict } from './forkGuard.ts';

/** SQL of the fork guard's record (migration 030, tree_forks): what the sealer found, for `integrity check`. */

export async function recordFork(db: Queryable, tenantId: string, verdict: ForkVerdict & { consistent: false }): Promise<void> {
  await db.query(
    `INSERT INTO tree_forks (tenant_id, detected_at, signed_size, signed_root, database_size, database_root, reason)
     VALUES ($1, clock_timestamp(), $2, $3, $4, $5, $6)`,
    [
      tenantId,
      verdict.ledger.treeSize,
      Buffer.from(verdict.ledger.rootHash, 'hex'),
      verdict.proposed.treeSize,
      Buffer.from(verdict.proposed.rootHash, 'hex'),
      verdict.reason,
    ],
  );
}

export type RecordedFork = {
  readonly tenant_id: string;
  readonly detected_at: string;
  readonly signed_size: number;
  readonly database_size: number;
  readonly reason: string;
};

/** Forks the sealer recorded, newest first, of the tenants named or of all. */
export async function recordedForks(db: Queryable, tenantIds: readonly string[] | undefined): Promise<RecordedFork[]> {
  const { rows } = await db.query<RecordedFork>(
    `SELECT tenant_id, to_char(detected_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS detected_at,
            signed_size::float8 AS signed_size, database_size::float8 AS database_size, reason
       FROM tree_forks WHERE $1::text[] IS NULL OR tenant_id = ANY($1::text[]) ORDER BY detected_at DESC`,
    [tenantIds ?? null],
  );
  return rows;
}
