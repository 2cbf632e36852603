import { prepared, type Queryable } from '../db/database.ts';
import { actionFamily } from './eventStore.ts';

/** The most actions one answer lists (docs/api.md "GET /audit/actions"); a trail rarely has more than a hundred. */
export const ACTIONS_LISTED = 1000;

/** A prefix matching more actions than this is filtered row by row instead of action by action (listEventDocuments). */
const FAMILY_READ_BY_ACTION = 100;

export interface TenantActions {
  /** Sorted (by the database's collation), each once. */
  readonly actions: string[];
  /** The tenant has more actions than were listed. */
  readonly truncated: boolean;
}

/**
 * The distinct actions of a tenant's trail, read by skipping through the (tenant_id, action, ...) index: one
 * probe per action (per monthly partition), however many events each has. A tenant of ten million events
 * and forty actions costs forty probes, not a scan.
 */
export async function listTenantActions(db: Queryable, tenantId: string, limit = ACTIONS_LISTED): Promise<TenantActions> {
  const { rows } = await db.query<{ action: string }>(
    prepared(
      `WITH RECURSIVE found(action) AS (
         (SELECT e.action FROM events e WHERE e.tenant_id = $1 ORDER BY e.action LIMIT 1)
         UNION ALL
         SELECT (SELECT e.action FROM events e WHERE e.tenant_id = $1 AND e.action > found.action ORDER BY e.action LIMIT 1)
           FROM found
          WHERE found.action IS NOT NULL
       )
       SELECT action FROM found WHERE action IS NOT NULL LIMIT $2::int`,
      [tenantId, limit + 1],
    ),
  );
  return { actions: rows.slice(0, limit).map((row) => row.action), truncated: rows.length > limit };
}

/**
 * The tenant's actions a prefix matches, so that a list can read each one's index in list order; undefined
 * when there are too many to read that way (or too many to know them all), and the prefix is then a filter
 * on the rows.
 */
export async function actionsOfFamily(db: Queryable, tenantId: string, prefix: string): Promise<string[] | undefined> {
  const { actions, truncated } = await listTenantActions(db, tenantId);
  if (truncated) return undefined;
  const { action, family } = actionFamily(prefix);
  const members = actions.filter((candidate) => candidate === action || candidate.startsWith(family));
  return members.length > FAMILY_READ_BY_ACTION ? undefined : members;
}
