import { textArrayLiteral } from '../db/arrayLiteral.ts';
import { type BinaryRows, copyOutBinary, sqlBoolean, sqlInteger, sqlLiteral } from '../db/binaryCopy.ts';
import type { Database } from '../db/database.ts';
import { DOCUMENT_PARTS, documentOfParts } from './eventDocument.ts';

// What log streams read of the trail: a tenant's events by their leaves, a chunk at a time. Apart from
// eventStore.ts, whose reads go by time (list, lookup, export).

/** A log stream's filter (streams/streamRules.ts): action prefixes as webhooks match them, and the PHI flag. */
export interface StreamEventFilter {
  /** Empty: every action. */
  readonly actionPrefixes: readonly string[];
  readonly phiInvolved: boolean | undefined;
}

/**
 * The rows of a tenant's leaves [fromLeaf, fromLeaf + maxLeaves), each led by its leaf index, leaving out
 * events the filter does not match and events that are gone (a retention drop). Log streams read the trail
 * through this: `leaf` (int8) and DOCUMENT_PARTS' six columns, as binary COPY sends them (db/binaryCopy.ts),
 * since a stream passes the documents on as bytes; documentOfLeafRow reads one as text. Postgres' own
 * rendering of the documents (EVENT_DOCUMENT's format()) cost it more than the rest of the read.
 *
 * One statement from the tree's leaf ranges to the events (leafChunkQuery): a stream read the keys first and
 * passed 5,000 of them back, two round trips and twice the parsing per chunk, about half of a backfill's read
 * time (BENCHMARKS.md, "Log streams"). The rows are not sorted by Postgres (its sort of megabytes of documents
 * held every row back until the last was found): either plan yields them in leaf order already (the hash join
 * probes with the keys in leaf order), and the reader checks. COPY takes no parameters: the values go in as
 * literals, and each read is planned for them (custom plans take the same two branches as the generic one;
 * test/events/leaf-chunks.test.ts).
 */
export function copyLeafDocuments(
  db: Database,
  tenantId: string,
  fromLeaf: number,
  maxLeaves: number,
  filter: StreamEventFilter,
): Promise<Buffer> {
  return copyOutBinary(db, leafChunkQuery(DOCUMENT_PARTS, leafChunkLiterals(tenantId, fromLeaf, maxLeaves, filter)));
}

/** leafChunkQuery's values as literals, checked as leafChunkValues checks them. */
export function leafChunkLiterals(tenantId: string, fromLeaf: number, maxLeaves: number, filter: StreamEventFilter): LeafChunkArguments {
  const [, , , prefixes] = leafChunkValues(tenantId, fromLeaf, maxLeaves, filter);
  return {
    tenant: sqlLiteral(tenantId),
    fromLeaf: `${sqlInteger(fromLeaf)}::int8`,
    maxLeaves: `${sqlInteger(maxLeaves)}::int8`,
    actionPrefixes: `${sqlLiteral(prefixes as string)}::text[]`,
    phiInvolved: sqlBoolean(filter.phiInvolved),
  };
}

/** The columns of a row of copyLeafDocuments: its leaf, then DOCUMENT_PARTS from this field on. */
export const LEAF_ROW_PARTS = 1;

/** The served document of a row of copyLeafDocuments, as text: what EVENT_DOCUMENT gives. */
export function documentOfLeafRow(row: BinaryRows): string {
  const first = LEAF_ROW_PARTS;
  return (
    row.text(first) ??
    documentOfParts([null, row.text(first + 1), row.uuid(first + 2), row.text(first + 3)!, row.boolean(first + 4), row.text(first + 5)!])
  );
}

/** The most leaves one chunk read takes (leafChunkQuery's plan is steered for chunks up to this size; the streams read 5,000). */
const MAX_CHUNK_LEAVES = 5_000;

/**
 * The SQL leafChunkQuery puts in for each of its values: parameters, in leafChunkValues' order (the default),
 * or literals (COPY takes no parameters).
 */
export interface LeafChunkArguments {
  readonly tenant: string;
  /** Of type int8. */
  readonly fromLeaf: string;
  /** Of type int8. */
  readonly maxLeaves: string;
  readonly actionPrefixes: string;
  readonly phiInvolved: string;
}

const PARAMETERS: LeafChunkArguments = {
  tenant: '$1',
  fromLeaf: '$2',
  maxLeaves: '$3',
  actionPrefixes: '$4::text[]',
  phiInvolved: '$5::boolean',
};

/** leafChunkQuery's parameters, in order. */
export function leafChunkValues(tenantId: string, fromLeaf: number, maxLeaves: number, filter: StreamEventFilter): unknown[] {
  if (!Number.isSafeInteger(maxLeaves) || maxLeaves < 1 || maxLeaves > MAX_CHUNK_LEAVES) {
    throw new Error(`a chunk read takes 1 to ${MAX_CHUNK_LEAVES} leaves, not ${maxLeaves}`);
  }
  return [tenantId, fromLeaf, maxLeaves, textArrayLiteral(filter.actionPrefixes), filter.phiInvolved ?? null];
}

/**
 * The statement reading the events of a tenant's leaves [$2, $2 + $3) that the filter ($4 action prefixes,
 * $5 PHI flag or NULL) lets through: a row per event, its leaf index and then `select`, expressions on the
 * event's row `e`; parameters as leafChunkValues gives them, or `values` in their place.
 *
 * Looking each leaf's event up by its primary key cost Postgres 4 µs an event, most of it the index descent
 * and the partition pruning that Postgres redoes for every key. The chunk's events lie in a window of time,
 * the span of its leaf ranges (min_occurred_at, max_occurred_at, which proofs rely on as well), and a
 * tenant's events of that window are usually the chunk's and hardly more: one index range scan of the window
 * hashed and probed with the chunk's keys costs half (BENCHMARKS.md, "A stream's chunk read hashes its
 * window"). A window holding many other events (a backfilled event years old sealed among today's) would make
 * the scan read them all, so the window is first counted up to twice the chunk's leaves, and past that the
 * chunk is read as before, key by key: one of the two branches runs, the other is skipped by its one-time
 * filter.
 */
export function leafChunkQuery(select: string, values: LeafChunkArguments = PARAMETERS): string {
  const { tenant, fromLeaf, maxLeaves } = values;
  const ranges = `r.tenant_id = ${tenant}
            AND r.first_leaf >= (SELECT coalesce(max(first_leaf), 0) FROM merkle_leaf_ranges WHERE tenant_id = ${tenant} AND first_leaf <= ${fromLeaf})
            AND r.first_leaf < ${fromLeaf} + ${maxLeaves}`;
  const leaf = 'r.first_leaf + k.position - 1';
  const filters = `(${values.phiInvolved} IS NULL OR e.phi_involved = ${values.phiInvolved})
          AND ${actionMatches(values.actionPrefixes, 'e.action')}`;
  // What the generic plan reckons decides between the hash join and a lookup per key, so it is steered. The
  // keys: the planner reckons an unnest of an array column at a handful of rows and would look each up, so each
  // range is joined to a generate_series of one row that it reckons at a thousand, fenced (OFFSET 0) so that it
  // stays there rather than run once per key. The window: the planner reckons it at a fixed share of the
  // tenant's events, millions for a big tenant. Both are capped by a LIMIT that never cuts (a chunk has at most
  // MAX_CHUNK_LEAVES keys; a window hashed at most twice that many events), so the estimates stay in the
  // thousands: past them the planner chose lookups again, and past a cost of 100,000 Postgres compiles the
  // statement (jit_above_cost) at every run, 160 ms for a tenant of 80 million events.
  return `WITH chunk_window AS MATERIALIZED (
         SELECT min(r.min_occurred_at) AS lo, max(r.max_occurred_at) AS hi FROM merkle_leaf_ranges r WHERE ${ranges}
       ), sparse AS MATERIALIZED (
         SELECT (SELECT count(*) FROM (SELECT FROM events e
                                        WHERE e.tenant_id = ${tenant} AND e.occurred_at >= w.lo AND e.occurred_at <= w.hi
                                        LIMIT 2 * ${maxLeaves} + 1) window_events) > 2 * ${maxLeaves} AS sparse
           FROM chunk_window w
       )
       SELECT k.leaf, ${select}
         FROM (SELECT ${leaf} AS leaf, k.occurred_at, k.event_id
                 FROM (SELECT r.first_leaf, r.event_occurred_at, r.event_ids
                         FROM merkle_leaf_ranges r
                        CROSS JOIN LATERAL generate_series(1, CASE WHEN r.first_leaf IS NULL THEN 0 ELSE 1 END) AS planner_estimate
                        WHERE ${ranges}
                       OFFSET 0) r
                CROSS JOIN LATERAL unnest(r.event_occurred_at, r.event_ids) WITH ORDINALITY AS k(occurred_at, event_id, position)
                WHERE ${leaf} >= ${fromLeaf} AND ${leaf} < ${fromLeaf} + ${maxLeaves}
                LIMIT ${MAX_CHUNK_LEAVES}) k
         JOIN (SELECT e.*
                 FROM events e
                WHERE e.tenant_id = ${tenant} AND e.occurred_at >= (SELECT lo FROM chunk_window) AND e.occurred_at <= (SELECT hi FROM chunk_window)
                  AND ${filters}
                LIMIT ${2 * MAX_CHUNK_LEAVES + 1}) e ON e.occurred_at = k.occurred_at AND e.event_id = k.event_id
        WHERE NOT (SELECT sparse FROM sparse)
       UNION ALL
       SELECT ${leaf}, ${select}
         FROM merkle_leaf_ranges r
        CROSS JOIN LATERAL unnest(r.event_occurred_at, r.event_ids) WITH ORDINALITY AS k(occurred_at, event_id, position)
         JOIN events e ON e.tenant_id = ${tenant} AND e.occurred_at = k.occurred_at AND e.event_id = k.event_id
        WHERE (SELECT sparse FROM sparse)
          AND ${ranges}
          AND ${leaf} >= ${fromLeaf} AND ${leaf} < ${fromLeaf} + ${maxLeaves}
          AND ${filters}`;
}

/** Whether `action` matches the text[] of action prefixes `prefixes`: the webhooks' rule (an empty list matches all). */
function actionMatches(prefixes: string, action: string): string {
  return `(cardinality(${prefixes}) = 0
          OR EXISTS (SELECT 1 FROM unnest(${prefixes}) AS entry
                     WHERE ${action} = entry
                        OR starts_with(${action}, CASE WHEN right(entry, 1) = '.' THEN entry ELSE entry || '.' END)))`;
}
