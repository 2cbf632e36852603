import type pg from 'pg';
import { textArrayLiteral } from '../db/arrayLiteral.ts';
import { type BinaryRows, copyOutBinary, sqlBoolean, sqlInteger, sqlLiteral } from '../db/binaryCopy.ts';
import { type Database, prepared, type Queryable } from '../db/database.ts';
import type { CursorPosition } from './cursor.ts';
import { COMPACT_DOCUMENT, DOCUMENT_PARTS, documentOfParts, EVENT_JSON, type DocumentParts } from './eventDocument.ts';
import type { EventFilters } from './eventFilters.ts';

/** An event as the write path stores it (row shape; its API document is rendered by renderEventDocument). */
export interface NewEvent {
  readonly tenantId: string;
  readonly occurredAtMs: number;
  readonly eventId: string;
  readonly action: string;
  readonly userId: string;
  readonly userRole: string;
  readonly resourceType: string;
  readonly resourceId: string;
  /** A JSON array as text, or "" for non-PHI events. */
  readonly fieldsAccessed: string;
  readonly phiInvolved: boolean;
  readonly sourceIp: string;
  readonly userAgent: string;
  readonly justification: string;
  readonly success: boolean;
  /** A JSON object as text. */
  readonly details: string;
}

export interface StoredEventKey {
  readonly tenantId: string;
  readonly eventId: string;
  readonly occurredAtMs: number;
}

/**
 * What every read sends: the stored document as it was written, whatever its version; a compact row's document
 * put together from its values and columns (COMPACT_DOCUMENT, migration 026); or for a row stored before there
 * were documents, its version-1 rendering from the columns. A sealed event's leaf is the hash of this
 * (integrity/sealStore.ts), so whatever a later version changes here must keep serving sealed events
 * exactly as they were sealed (test/integrity/served-form.test.ts). The list, the lookup and the export read
 * DOCUMENT_PARTS instead and put the same bytes together in Node (documentOfParts).
 */
export const EVENT_DOCUMENT = `COALESCE(${COMPACT_DOCUMENT}, ${EVENT_JSON})`;

const EPOCH_MS = `(extract(epoch FROM e.occurred_at) * 1000)::int8`;

/** Creates the monthly partitions holding these instants, where missing. */
export async function ensureEventPartitions(db: Queryable, instantsMs: readonly number[]): Promise<void> {
  if (instantsMs.length === 0) return;
  await db.query('SELECT audit_ensure_event_partition(at) FROM unnest($1::timestamptz[]) AS at', [
    instantsMs.map((ms) => new Date(ms).toISOString()),
  ]);
}

/**
 * One page in list order, (timestamp DESC, event_id DESC): a total order, so pages never skip or repeat an
 * event even when thousands share a millisecond. Each filter is an equality on the leading columns of an
 * index, and the cursor a row comparison on the trailing ones. The rows are the events' documents.
 */
export async function listEventDocuments(
  db: Queryable,
  tenantId: string,
  filters: EventFilters,
  after: CursorPosition | undefined,
  limit: number,
): Promise<string[]> {
  const { where, values } = filterConditions(tenantId, filters);
  if (after) {
    values.push(new Date(after.occurredAtMs).toISOString(), after.eventId);
    where.push(`(e.occurred_at, e.event_id) < ($${values.length - 1}::timestamptz, $${values.length}::uuid)`);
  }
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`a page reads a positive whole number of rows, not ${limit}`);
  // The row count is written into the text rather than passed: with `LIMIT $n` the generic plan reckons on a
  // tenth of a tenant's rows and lost to custom plans, so Postgres planned the query over every monthly
  // partition at each request, which cost it more than running it (BENCHMARKS.md, "List: planned once,
  // documents put together in Node"). Page sizes are few; prepared() bounds the statements all the same.
  const text = `SELECT ${DOCUMENT_PARTS}
         FROM events e
        WHERE ${where.join(' AND ')}
        ORDER BY e.occurred_at DESC, e.event_id DESC
        LIMIT ${limit}`;
  // A page bounded in time (a cursor, since, until) is planned for its own bounds, every time. A generic plan
  // cannot see how many of a tenant's rows a bound leaves (it reckons on a third), and for a big tenant with
  // an action filter behind a cursor it chose a bitmap scan and a sort over every match: 450 ms against 5 ms
  // (BENCHMARKS.md, "A list page bounded in time is planned for its bounds").
  const boundedInTime = after !== undefined || filters.sinceMs !== undefined || filters.untilMs !== undefined;
  const query: pg.QueryArrayConfig = { ...(boundedInTime ? { text, values } : prepared(text, values)), rowMode: 'array' };
  const rows = (await db.query(query)).rows as unknown as DocumentParts[];
  return rows.map(documentOfParts);
}

/** Where a document sits in list order, for the cursor of the page it ends. */
export function positionOf(document: string): CursorPosition {
  const { event_id: eventId, timestamp } = JSON.parse(document) as { event_id: string; timestamp: string };
  return { eventId, occurredAtMs: Date.parse(timestamp) };
}

/**
 * The serialised event, or undefined when it does not exist in this tenant. A producer that reuses an
 * event_id with another timestamp stores two events (id and timestamp together identify a retry, and
 * refusing the reuse would cost every write a look-up in every partition): the lookup then answers the
 * newest, always the same one, as the proof endpoint does (docs/api.md).
 */
export async function findEventDocument(db: Queryable, tenantId: string, eventId: string): Promise<string | undefined> {
  const query: pg.QueryArrayConfig = {
    ...prepared(
      `SELECT ${DOCUMENT_PARTS} FROM events e WHERE e.tenant_id = $1 AND e.event_id = $2::uuid ORDER BY e.occurred_at DESC LIMIT 1`,
      [tenantId, eventId],
    ),
    rowMode: 'array',
  };
  const [row] = (await db.query(query)).rows as unknown as DocumentParts[];
  return row && documentOfParts(row);
}

export interface ExportWindow {
  /** Rows the filters match, counted up to cap + 1. */
  readonly matched: number;
  readonly newestMs: number | undefined;
  /** The timestamp of row cap + 1, when there is one: the export must stop short of its millisecond. */
  readonly boundaryMs: number | undefined;
}

/** Sizes an export: whether it exceeds the cap, and where the last whole millisecond ends. */
export async function measureExportWindow(db: Queryable, tenantId: string, filters: EventFilters, cap: number): Promise<ExportWindow> {
  const { where, values } = filterConditions(tenantId, filters);
  values.push(cap + 1);
  const { rows } = await db.query<{ matched: number; newest_ms: number | null; oldest_ms: number | null }>(
    `SELECT count(*)::int AS matched, max(ms) AS newest_ms, min(ms) AS oldest_ms
       FROM (SELECT ${EPOCH_MS} AS ms
               FROM events e
              WHERE ${where.join(' AND ')}
              ORDER BY e.occurred_at DESC, e.event_id DESC
              LIMIT $${values.length}) window_rows`,
    values,
  );
  const row = rows[0]!;
  return {
    matched: row.matched,
    newestMs: row.newest_ms ?? undefined,
    boundaryMs: row.matched > cap ? (row.oldest_ms ?? undefined) : undefined,
  };
}

/**
 * The export query in list order. `newerThanMs` keeps the rows strictly newer than a millisecond,
 * `onlyMs` the rows of exactly one millisecond. Its rows are DocumentParts (documentOfParts serves them).
 */
export function exportQuery(
  tenantId: string,
  filters: EventFilters,
  bound: { newerThanMs?: number; onlyMs?: number },
): { text: string; values: unknown[] } {
  const { where, values } = filterConditions(tenantId, filters);
  if (bound.newerThanMs !== undefined) {
    values.push(new Date(bound.newerThanMs).toISOString());
    where.push(`e.occurred_at > $${values.length}::timestamptz`);
  }
  if (bound.onlyMs !== undefined) {
    values.push(new Date(bound.onlyMs).toISOString());
    where.push(`e.occurred_at = $${values.length}::timestamptz`);
  }
  return {
    text: `SELECT ${DOCUMENT_PARTS} FROM events e WHERE ${where.join(' AND ')} ORDER BY e.occurred_at DESC, e.event_id DESC`,
    values,
  };
}

/** WHERE fragments and their parameters for the shared list/export filters. */
export function filterConditions(tenantId: string, filters: EventFilters): { where: string[]; values: unknown[] } {
  const where = ['e.tenant_id = $1'];
  const values: unknown[] = [tenantId];
  const add = (fragment: (param: string) => string, value: unknown) => {
    values.push(value);
    where.push(fragment(`$${values.length}`));
  };
  if (filters.action !== undefined) add((p) => `e.action = ${p}`, filters.action);
  if (filters.resourceType !== undefined) add((p) => `e.resource_type = ${p}`, filters.resourceType);
  if (filters.userId !== undefined) add((p) => `e.user_id = ${p}`, filters.userId);
  if (filters.resourceId !== undefined) add((p) => `e.resource_id = ${p}`, filters.resourceId);
  if (filters.phiInvolved !== undefined) add((p) => `e.phi_involved = ${p}`, filters.phiInvolved);
  if (filters.sinceMs !== undefined) add((p) => `e.occurred_at >= ${p}::timestamptz`, new Date(filters.sinceMs).toISOString());
  if (filters.untilMs !== undefined) add((p) => `e.occurred_at < ${p}::timestamptz`, new Date(filters.untilMs).toISOString());
  return { where, values };
}

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
