import { prepared, type Queryable } from '../db/database.ts';
import type { KeyEnvironment } from './apiKeyFormat.ts';

/** api_keys as the domain sees it; the hash never leaves the auth module. */
export interface ApiKeyRecord {
  readonly lookupId: string;
  readonly environment: KeyEnvironment;
  readonly secretHash: Buffer;
  readonly tenantId: string;
  readonly scopes: readonly string[];
  readonly allowedCidrs: readonly string[];
  readonly description: string;
  readonly managedBy: string | null;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
}

interface ApiKeyRow {
  lookup_id: string;
  environment: KeyEnvironment;
  secret_hash: Buffer;
  tenant_id: string;
  scopes: string[];
  allowed_cidrs: string[];
  description: string;
  managed_by: string | null;
  created_at: Date;
  revoked_at: Date | null;
  [column: string]: unknown;
}

const COLUMNS = `lookup_id, environment, secret_hash, tenant_id, scopes, allowed_cidrs, description, managed_by,
                 created_at, revoked_at`;

function toRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    lookupId: row.lookup_id,
    environment: row.environment,
    secretHash: row.secret_hash,
    tenantId: row.tenant_id,
    scopes: row.scopes,
    allowedCidrs: row.allowed_cidrs,
    description: row.description,
    managedBy: row.managed_by,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}

export type NewApiKey = Omit<ApiKeyRecord, 'createdAt' | 'revokedAt'>;

/** Inserts a key; false when the lookup id is taken (the caller draws another). */
export async function insertApiKey(db: Queryable, key: NewApiKey): Promise<ApiKeyRecord | undefined> {
  const { rows } = await db.query<ApiKeyRow>(
    `INSERT INTO api_keys (lookup_id, environment, secret_hash, tenant_id, scopes, allowed_cidrs, description, managed_by)
     VALUES ($1, $2, $3, $4, $5::text[], $6::text[], $7, $8)
     ON CONFLICT (lookup_id) DO NOTHING
     RETURNING ${COLUMNS}`,
    [key.lookupId, key.environment, key.secretHash, key.tenantId, key.scopes, key.allowedCidrs, key.description, key.managedBy],
  );
  return rows[0] && toRecord(rows[0]);
}

export async function findApiKey(db: Queryable, lookupId: string): Promise<ApiKeyRecord | undefined> {
  const { rows } = await db.query<ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE lookup_id = $1`, [lookupId]);
  return rows[0] && toRecord(rows[0]);
}

/**
 * Reads the key with id $1 if there is one, and otherwise the nearest key after it (the first key when none
 * comes after), so that both cases descend the index once and fetch one row from the heap. With an equality
 * lookup only a present id fetched its row: 0.6 µs more in Postgres (z = −17 over 5,000 back-to-back
 * triples, BENCHMARKS.md "401 timing"), which made a known id's 401 the slower one over HTTP. The row read
 * for another id is only a cost: found is false and every column is the decoy's.
 *
 * An id past the last key descends twice (the first branch finds nothing): 0.3 to 0.5 µs more, for about
 * 1/(keys + 1) of the ids a prober can guess.
 */
export const FIND_API_KEY_OR_DECOY_SQL = `
  SELECT match.found, wanted.lookup_id,
         CASE WHEN match.found THEN nearest.environment ELSE $2 END AS environment,
         CASE WHEN match.found THEN nearest.secret_hash ELSE $3::bytea END AS secret_hash,
         CASE WHEN match.found THEN nearest.tenant_id ELSE '' END AS tenant_id,
         CASE WHEN match.found THEN nearest.scopes ELSE '{}'::text[] END AS scopes,
         CASE WHEN match.found THEN nearest.allowed_cidrs ELSE '{}'::text[] END AS allowed_cidrs,
         CASE WHEN match.found THEN nearest.description ELSE '' END AS description,
         CASE WHEN match.found THEN nearest.managed_by END AS managed_by,
         CASE WHEN match.found THEN nearest.created_at ELSE now() END AS created_at,
         CASE WHEN match.found THEN nearest.revoked_at ELSE now() END AS revoked_at
    FROM (SELECT $1::text AS lookup_id) AS wanted
    LEFT JOIN LATERAL (
      (SELECT ${COLUMNS} FROM api_keys WHERE lookup_id >= wanted.lookup_id ORDER BY lookup_id LIMIT 1)
      UNION ALL
      (SELECT ${COLUMNS} FROM api_keys ORDER BY lookup_id LIMIT 1)
      LIMIT 1
    ) AS nearest ON true
    CROSS JOIN LATERAL (SELECT coalesce(nearest.lookup_id = wanted.lookup_id, false) AS found) AS match`;

/**
 * The key with this lookup id, or, when there is none, a revoked decoy built from the given environment and
 * hash, in a row of the same shape. Authentication reads keys through this: a missing key and a present one
 * cost Postgres, the driver and the caller the same work (one index descent and one heap row, one row of the
 * same columns back, the same parsing), so a 401's timing does not tell which lookup ids exist. Prepared:
 * unprepared, a call took 740 µs against 68 µs prepared, planning this text costing ten times its run.
 */
export async function findApiKeyOrDecoy(
  db: Queryable,
  lookupId: string,
  decoy: { readonly environment: KeyEnvironment; readonly secretHash: Buffer },
): Promise<{ readonly found: boolean; readonly record: ApiKeyRecord }> {
  const { rows } = await db.query<ApiKeyRow & { found: boolean }>(
    prepared(FIND_API_KEY_OR_DECOY_SQL, [lookupId, decoy.environment, decoy.secretHash]),
  );
  const row = rows[0]!;
  return { found: row.found, record: toRecord(row) };
}

/** The newest key a Kubernetes ApiKey resource owns, revoked or not. */
export async function findManagedApiKey(db: Queryable, managedBy: string): Promise<ApiKeyRecord | undefined> {
  const { rows } = await db.query<ApiKeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE managed_by = $1 ORDER BY created_at DESC LIMIT 1`, [
    managedBy,
  ]);
  return rows[0] ? toRecord(rows[0]) : undefined;
}

/** Marks the key revoked; returns it only if it was active until now. */
export async function revokeApiKey(db: Queryable, lookupId: string): Promise<ApiKeyRecord | undefined> {
  const { rows } = await db.query<ApiKeyRow>(
    `UPDATE api_keys SET revoked_at = now() WHERE lookup_id = $1 AND revoked_at IS NULL RETURNING ${COLUMNS}`,
    [lookupId],
  );
  return rows[0] && toRecord(rows[0]);
}

/** Changes scopes, allow-list and description in place (the ApiKey resource's spec edits). */
export async function updateApiKeyGrants(
  db: Queryable,
  lookupId: string,
  grants: { scopes: readonly string[]; allowedCidrs: readonly string[]; description: string },
): Promise<ApiKeyRecord | undefined> {
  const { rows } = await db.query<ApiKeyRow>(
    `UPDATE api_keys SET scopes = $2::text[], allowed_cidrs = $3::text[], description = $4
      WHERE lookup_id = $1 RETURNING ${COLUMNS}`,
    [lookupId, grants.scopes, grants.allowedCidrs, grants.description],
  );
  return rows[0] && toRecord(rows[0]);
}

export async function listApiKeys(db: Queryable, tenantId?: string): Promise<ApiKeyRecord[]> {
  const { rows } = await db.query<ApiKeyRow>(
    `SELECT ${COLUMNS} FROM api_keys WHERE $1::text IS NULL OR tenant_id = $1 ORDER BY tenant_id, created_at`,
    [tenantId ?? null],
  );
  return rows.map(toRecord);
}
