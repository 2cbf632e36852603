import type pg from 'pg';
import { prepared, type Queryable } from '../db/database.ts';
import type { EventFilters } from '../events/eventFilters.ts';
import { EVENT_DOCUMENT, filterConditions } from '../events/eventStore.ts';
import { LEAF_OF_EVENT } from '../integrity/treeStore.ts';

/**
 * SQL of live streams. A live stream reads a tenant's trail in sealed leaf order, as log streams do: leaves
 * are appended after commit, under the tree's lock, so their order is the order in which events became
 * visible. Ids and timestamps are assigned at insert, not at commit; "everything after the last event
 * seen" by either would pass over an event whose transaction committed late.
 */

/** The tenant's sealed leaves: every leaf below this has its range (both are written in one transaction). */
export async function sealedSize(db: Queryable, tenantId: string): Promise<number> {
  const { rows } = await db.query<{ tree_size: string }>(prepared('SELECT tree_size FROM merkle_trees WHERE tenant_id = $1', [tenantId]));
  return rows[0] ? Number(rows[0].tree_size) : 0;
}

export type EventLeaf = { readonly kind: 'sealed'; readonly leaf: number } | { readonly kind: 'unsealed' } | { readonly kind: 'unknown' };

/**
 * The leaf of the tenant's event with this id. An id a producer reused with another timestamp names two
 * events: the earlier leaf is taken, so a stream resumed after it may repeat the later one but never skips
 * an event.
 */
export async function leafOfEvent(db: Queryable, tenantId: string, eventId: string): Promise<EventLeaf> {
  const { rows } = await db.query<{ found: number; leaf: string | null }>(
    prepared(
      `SELECT count(*)::int AS found, min(${LEAF_OF_EVENT}) AS leaf FROM events e WHERE e.tenant_id = $1 AND e.event_id = $2::uuid`,
      [tenantId, eventId],
    ),
  );
  const row = rows[0]!;
  if (row.found === 0) return { kind: 'unknown' };
  return row.leaf === null ? { kind: 'unsealed' } : { kind: 'sealed', leaf: Number(row.leaf) };
}

export interface LiveDocument {
  readonly leaf: number;
  readonly eventId: string;
  readonly document: string;
}

/**
 * The documents of the events at leaves [fromLeaf, toLeaf) that match the filters, in leaf order. The range
 * holding fromLeaf is found by the primary key and the ranges after it follow it in that index; each leaf's
 * event is read by its primary key. Events gone from the store (a retention drop) are left out.
 */
export async function liveDocuments(
  db: Queryable,
  tenantId: string,
  filters: EventFilters,
  fromLeaf: number,
  toLeaf: number,
): Promise<LiveDocument[]> {
  const { where, values } = filterConditions(tenantId, filters);
  values.push(fromLeaf, toLeaf);
  const from = `$${values.length - 1}::int8`;
  const to = `$${values.length}::int8`;
  const query: pg.QueryArrayConfig = {
    ...prepared(
      `SELECT r.first_leaf + k.position - 1, e.event_id::text, ${EVENT_DOCUMENT}
         FROM merkle_leaf_ranges r
        CROSS JOIN LATERAL unnest(r.event_occurred_at, r.event_ids) WITH ORDINALITY AS k(occurred_at, event_id, position)
         JOIN events e ON e.tenant_id = r.tenant_id AND e.occurred_at = k.occurred_at AND e.event_id = k.event_id
        WHERE r.tenant_id = $1
          AND r.first_leaf >= (SELECT coalesce(max(first_leaf), 0) FROM merkle_leaf_ranges WHERE tenant_id = $1 AND first_leaf <= ${from})
          AND r.first_leaf < ${to}
          AND r.first_leaf + k.position - 1 >= ${from} AND r.first_leaf + k.position - 1 < ${to}
          AND ${where.join(' AND ')}
        ORDER BY r.first_leaf, k.position`,
      values,
    ),
    rowMode: 'array',
  };
  const rows = (await db.query(query)).rows as unknown as Array<[leaf: string, eventId: string, document: string]>;
  return rows.map(([leaf, eventId, document]) => ({ leaf: Number(leaf), eventId, document }));
}
