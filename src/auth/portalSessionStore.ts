import type { Queryable } from '../db/database.ts';

/** portal_sessions as the domain sees it; the hashes never leave the auth module. */
export interface PortalSessionRecord {
  readonly id: string;
  readonly tenantId: string;
  readonly capabilities: readonly string[];
  readonly mintedBy: string;
  readonly createdAt: Date;
  readonly expiresAt: Date;
  readonly linkUsedAt: Date | null;
  readonly endedAt: Date | null;
}

/** A session as a request sees it: its own state and what the minting key may do now. */
export interface LiveSession extends PortalSessionRecord {
  readonly linkHash: Buffer;
  readonly browserHash: Buffer | null;
  /** The minting key's scopes now, or null when it is revoked. */
  readonly keyScopes: readonly string[] | null;
  /** Whether expires_at has passed by the database's clock. */
  readonly expired: boolean;
}

interface SessionRow {
  id: string;
  tenant_id: string;
  capabilities: string[];
  minted_by: string;
  created_at: Date;
  expires_at: Date;
  link_used_at: Date | null;
  ended_at: Date | null;
  [column: string]: unknown;
}

const COLUMNS = 'id, tenant_id, capabilities, minted_by, created_at, expires_at, link_used_at, ended_at';

function toRecord(row: SessionRow): PortalSessionRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    capabilities: row.capabilities,
    mintedBy: row.minted_by,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    linkUsedAt: row.link_used_at,
    endedAt: row.ended_at,
  };
}

export async function insertPortalSession(
  db: Queryable,
  session: { id: string; tenantId: string; capabilities: readonly string[]; mintedBy: string; linkHash: Buffer; ttlSeconds: number },
): Promise<PortalSessionRecord> {
  const { rows } = await db.query<SessionRow>(
    `INSERT INTO portal_sessions (id, tenant_id, capabilities, minted_by, link_hash, expires_at)
     VALUES ($1::text, $2::text, $3::text[], $4::text, $5::bytea, now() + make_interval(secs => $6::int))
     RETURNING ${COLUMNS}`,
    [session.id, session.tenantId, session.capabilities, session.mintedBy, session.linkHash, session.ttlSeconds],
  );
  return toRecord(rows[0]!);
}

/**
 * The session with its minting key's current scopes, read on every request that presents it: ending a
 * session or revoking its key takes effect at once, on every api instance, with no cache to wait out.
 */
export async function findLiveSession(db: Queryable, id: string): Promise<LiveSession | undefined> {
  const { rows } = await db.query<
    SessionRow & { link_hash: Buffer; browser_hash: Buffer | null; key_scopes: string[] | null; expired: boolean }
  >(
    `SELECT s.id, s.tenant_id, s.capabilities, s.minted_by, s.created_at, s.expires_at, s.link_used_at, s.ended_at,
            s.link_hash, s.browser_hash, s.expires_at <= now() AS expired,
            CASE WHEN k.revoked_at IS NULL THEN k.scopes END AS key_scopes
       FROM portal_sessions s JOIN api_keys k ON k.lookup_id = s.minted_by
      WHERE s.id = $1::text`,
    [id],
  );
  const row = rows[0];
  if (!row) return undefined;
  return { ...toRecord(row), linkHash: row.link_hash, browserHash: row.browser_hash, keyScopes: row.key_scopes, expired: row.expired };
}

/**
 * Uses the link: succeeds for exactly one caller, while the session is neither ended nor expired, and stores
 * the hash of the browser's secret. Returns undefined when another exchange came first or the session is over.
 */
export async function useLink(db: Queryable, id: string, browserHash: Buffer): Promise<PortalSessionRecord | undefined> {
  const { rows } = await db.query<SessionRow>(
    `UPDATE portal_sessions SET link_used_at = now(), browser_hash = $2::bytea
      WHERE id = $1::text AND link_used_at IS NULL AND ended_at IS NULL AND expires_at > now()
      RETURNING ${COLUMNS}`,
    [id, browserHash],
  );
  return rows[0] && toRecord(rows[0]);
}

/** Ends a tenant's session; returns it only if it was not ended before (expired sessions can still be ended). */
export async function endPortalSession(db: Queryable, tenantId: string, id: string): Promise<PortalSessionRecord | undefined> {
  const { rows } = await db.query<SessionRow>(
    `UPDATE portal_sessions SET ended_at = now() WHERE id = $1::text AND tenant_id = $2::text AND ended_at IS NULL RETURNING ${COLUMNS}`,
    [id, tenantId],
  );
  return rows[0] && toRecord(rows[0]);
}

export async function findPortalSession(db: Queryable, tenantId: string, id: string): Promise<PortalSessionRecord | undefined> {
  const { rows } = await db.query<SessionRow>(`SELECT ${COLUMNS} FROM portal_sessions WHERE id = $1::text AND tenant_id = $2::text`, [
    id,
    tenantId,
  ]);
  return rows[0] && toRecord(rows[0]);
}
