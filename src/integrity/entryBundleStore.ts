import { prepared, type Queryable } from '../db/database.ts';

/**
 * SQL of the kept full entry bundles (migration 031): a bundle is served from here only while it was built at
 * its tenant's current generation, which every redaction and expiry moves on in its own transaction.
 */

export interface KeptEntryBundle {
  /** The tenant's bundle generation now: what a bundle built from here on is kept under. */
  readonly generation: number;
  /** The bundle, when one built at this generation is kept. */
  readonly body: Buffer | undefined;
}

/** The tenant's generation and, if kept at it, the bundle: one statement, so both are of one snapshot. */
export async function keptEntryBundle(db: Queryable, tenantId: string, bundleIndex: number): Promise<KeptEntryBundle> {
  const { rows } = await db.query<{ generation: string; body: Buffer | null }>(
    prepared(
      `SELECT g.generation, b.body
         FROM (SELECT coalesce((SELECT generation FROM merkle_bundle_generations WHERE tenant_id = $1), 0) AS generation) g
         LEFT JOIN merkle_entry_bundles b ON b.tenant_id = $1 AND b.bundle_index = $2 AND b.generation = g.generation`,
      [tenantId, bundleIndex],
    ),
  );
  const row = rows[0]!;
  return { generation: Number(row.generation), body: row.body ?? undefined };
}

/** Keeps a bundle built at `generation`, unless one of a later generation is kept already. */
export async function keepEntryBundle(
  db: Queryable,
  tenantId: string,
  bundleIndex: number,
  generation: number,
  body: Buffer,
): Promise<void> {
  await db.query(
    prepared(
      `INSERT INTO merkle_entry_bundles (tenant_id, bundle_index, generation, body) VALUES ($1, $2, $3, $4)
       ON CONFLICT (tenant_id, bundle_index) DO UPDATE SET generation = excluded.generation, body = excluded.body
        WHERE merkle_entry_bundles.generation < excluded.generation`,
      [tenantId, bundleIndex, generation, body],
    ),
  );
}
