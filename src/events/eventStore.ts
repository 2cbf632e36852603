import type pg from 'pg';
import { prepared, type Queryable } from '../db/database.ts';
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
 * (integrity/sealQueueStore.ts), so whatever a later version changes here must keep serving sealed events
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
 *
 * An action prefix comes with the actions it matches (`family`, tenantActions.ts): each action's index is
 * read in list order for at most one page, and the pages merged, so a family costs its members' pages
 * rather than a sort of every event it matches.
 */
export async function listEventDocuments(
  db: Queryable,
  tenantId: string,
  filters: EventFilters,
  after: CursorPosition | undefined,
  limit: number,
  family?: readonly string[],
): Promise<string[]> {
  const { where, values } = filterConditions(tenantId, family ? { ...filters, actionPrefix: undefined } : filters);
  if (after) where.push(afterCondition(values, after));
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`a page reads a positive whole number of rows, not ${limit}`);
  // The row count is written into the text rather than passed: with `LIMIT $n` the generic plan reckons on a
  // tenth of a tenant's rows and lost to custom plans, so Postgres planned the query over every monthly
  // partition at each request, which cost it more than running it (BENCHMARKS.md, "List: planned once,
  // documents put together in Node"). Page sizes are few; prepared() bounds the statements all the same.
  const inListOrder = `ORDER BY e.occurred_at DESC, e.event_id DESC LIMIT ${limit}`;
  let text = `SELECT ${DOCUMENT_PARTS} FROM events e WHERE ${where.join(' AND ')} ${inListOrder}`;
  if (family) {
    values.push(family);
    text = `SELECT ${DOCUMENT_PARTS}
              FROM unnest($${values.length}::text[]) AS family(action)
             CROSS JOIN LATERAL (SELECT * FROM events e WHERE ${where.join(' AND ')} AND e.action = family.action ${inListOrder}) e
             ${inListOrder}`;
  }
  // A page bounded in time (a cursor, since, until) is planned for its own bounds, every time. A generic plan
  // cannot see how many of a tenant's rows a bound leaves (it reckons on a third), and for a big tenant with
  // an action filter behind a cursor it chose a bitmap scan and a sort over every match: 450 ms against 5 ms
  // (BENCHMARKS.md, "A list page bounded in time is planned for its bounds").
  const boundedInTime = after !== undefined || filters.sinceMs !== undefined || filters.untilMs !== undefined;
  const query: pg.QueryArrayConfig = { ...(boundedInTime ? { text, values } : prepared(text, values)), rowMode: 'array' };
  const rows = (await db.query(query)).rows as unknown as DocumentParts[];
  return rows.map(documentOfParts);
}

/** The keyset condition of the rows after a position in list order; its two values are pushed onto `values`. */
export function afterCondition(values: unknown[], after: CursorPosition): string {
  values.push(new Date(after.occurredAtMs).toISOString(), after.eventId);
  return `(e.occurred_at, e.event_id) < ($${values.length - 1}::timestamptz, $${values.length}::uuid)`;
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
  if (filters.actionPrefix !== undefined) {
    const { action, family } = actionFamily(filters.actionPrefix);
    values.push(action, family);
    where.push(`(e.action = $${values.length - 1} OR starts_with(e.action, $${values.length}))`);
  }
  return { where, values };
}

/** What a prefix matches, as webhook filters match: the action it names, and those starting with it and a dot. */
export function actionFamily(prefix: string): { action: string; family: string } {
  return { action: prefix, family: prefix.endsWith('.') ? prefix : `${prefix}.` };
}
