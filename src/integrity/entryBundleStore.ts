import { prepared, type Queryable } from '../db/database.ts';

/**
 * SQL of the kept full entry bundles (migration 031): a bundle is served from here only while it was built at
 * its tenant's current generation, and kept only while the generation it was built at is still the current
 * one, which every redaction and expiry moves on (removing the tenant's kept bundles) in its own transaction.
 */

export interface KeptEntryBundle {
  /** The tenant's bundle generation now: what a bundle built from here on is kept under. */
  readonly generation: number;
  /** The bundle's entries joined by newlines, when one built at this generation is kept. */
  readonly entries: string | undefined;
}

/** The tenant's bundle generation now. */
export async function bundleGeneration(db: Queryable, tenantId: string): Promise<number> {
  return (await keptEntryBundle(db, tenantId, -1)).generation;
}

/** The tenant's generation and, if kept at it, the bundle: one statement, so both are of one snapshot. */
export async function keptEntryBundle(db: Queryable, tenantId: string, bundleIndex: number): Promise<KeptEntryBundle> {
  const { rows } = await db.query<{ generation: string; entries: string | null }>(
    prepared(
      `SELECT g.generation, b.entries
         FROM (SELECT coalesce((SELECT generation FROM merkle_bundle_generations WHERE tenant_id = $1), 0) AS generation) g
         LEFT JOIN merkle_entry_bundles b ON b.tenant_id = $1 AND b.bundle_index = $2 AND b.generation = g.generation`,
      [tenantId, bundleIndex],
    ),
  );
  const row = rows[0]!;
  return { generation: Number(row.generation), entries: row.entries ?? undefined };
}

/**
 * Keeps a bundle built from events read after `generation` was, if that is still the tenant's generation.
 * The generation's row is locked while the bundle is written: a redaction or an expiry that has moved it on
 * meanwhile is waited for and then seen (nothing is kept), and one that moves it on later waits for this to
 * commit and then removes what it kept. The row is created first when the tenant has none, so there is one
 * to lock.
 */
export async function keepEntryBundle(
  db: Queryable,
  tenantId: string,
  bundleIndex: number,
  generation: number,
  entries: string,
): Promise<void> {
  if (generation === 0)
    await db.query(
      prepared('INSERT INTO merkle_bundle_generations (tenant_id, generation) VALUES ($1, 0) ON CONFLICT (tenant_id) DO NOTHING', [
        tenantId,
      ]),
    );
  await db.query(
    prepared(
      `INSERT INTO merkle_entry_bundles (tenant_id, bundle_index, generation, entries)
       SELECT $1, $2, $3, $4 FROM merkle_bundle_generations WHERE tenant_id = $1 AND generation = $3 FOR SHARE
       ON CONFLICT (tenant_id, bundle_index) DO UPDATE SET generation = excluded.generation, entries = excluded.entries
        WHERE merkle_entry_bundles.generation < excluded.generation`,
      [tenantId, bundleIndex, generation, entries],
    ),
  );
}
