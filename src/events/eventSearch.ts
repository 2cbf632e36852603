import type pg from 'pg';
import type { Queryable } from '../db/database.ts';
import type { CursorPosition } from './cursor.ts';
import { DOCUMENT_PARTS, documentOfParts, type DocumentParts } from './eventDocument.ts';
import type { EventFilters } from './eventFilters.ts';
import { afterCondition, filterConditions } from './eventStore.ts';

/**
 * The list's free-text search, `q` (docs/api.md "Search"): a case-insensitive substring of the event's id,
 * action, user_id, resource_type or resource_id, the fields a person looks an event up by. No index can
 * answer a substring of those for every tenant without taxing every write, so a search walks the events the
 * other filters select, newest first, and examines at most SEARCH_SCAN_ROWS of them per request: a page
 * costs that walk at worst, however large the tenant. When the walk ends before the page is full, the page
 * says how far it searched (`searched_to`) and its cursor continues from there; the next page searches on.
 *
 * The bound is measured (BENCHMARKS.md, "Search"): a walk of this many events, none matching, takes about
 * as long as the list's p99 goal of 50 ms allows on the benchmark machine.
 */
export const SEARCH_SCAN_ROWS = 5_000;

/** The search text as matched: lowercased (the columns are lowercased in SQL), surrounding spaces gone. */
export function searchText(q: string): string {
  return q.trim().toLowerCase();
}

export interface SearchResult {
  /** Up to `rows` matching documents, in list order. */
  readonly documents: string[];
  /** Where the walk stopped short of the window's end: the last event it examined. */
  readonly searchedTo: CursorPosition | undefined;
}

/** A row of the search statement: a match's document parts, or the walk's boundary (parts mostly null). */
type SearchRow = [...DocumentParts, boundary: boolean, occurredAtMs: string | null];

/** One page of a search: the matches among the next `scanRows` events of the window after `after`. */
export async function searchEventDocuments(
  db: Queryable,
  tenantId: string,
  filters: EventFilters & { search: string },
  after: CursorPosition | undefined,
  rows: number,
  scanRows = SEARCH_SCAN_ROWS,
): Promise<SearchResult> {
  const { where, values } = filterConditions(tenantId, filters);
  if (after) where.push(afterCondition(values, after));
  const selected = where.join(' AND ');
  values.push(filters.search);
  const q = `$${values.length}`;
  const matches = ['e.event_id::text', 'e.action', 'lower(e.user_id)', 'lower(e.resource_type)', 'lower(e.resource_id)']
    .map((column) => `strpos(${column}, ${q}) > 0`)
    .join(' OR ');
  // The first part walks: its inner LIMIT bounds the walk, its outer one stops the walk once the page is full.
  // The second part is the walk's last event, where the next page starts when this one is not full. Postgres
  // runs the parts in turn under the outer LIMIT, so a full page never runs the second.
  const text = `(SELECT ${DOCUMENT_PARTS}, false, NULL::text
                   FROM (SELECT * FROM events e WHERE ${selected} ORDER BY e.occurred_at DESC, e.event_id DESC LIMIT ${scanRows}) e
                  WHERE ${matches}
                  ORDER BY e.occurred_at DESC, e.event_id DESC LIMIT ${rows})
                UNION ALL
                (SELECT NULL::text, NULL::text, e.event_id, e.action, e.phi_involved, e.tenant_id, true,
                        (extract(epoch FROM e.occurred_at) * 1000)::int8::text
                   FROM events e WHERE ${selected}
                  ORDER BY e.occurred_at DESC, e.event_id DESC OFFSET ${scanRows - 1} LIMIT 1)
                LIMIT ${rows}`;
  const query: pg.QueryArrayConfig = { text, values, rowMode: 'array' };
  const found = (await db.query(query)).rows as unknown as SearchRow[];
  const boundary = found.find((row) => row[6]);
  const documents = found.filter((row) => !row[6]).map((row) => documentOfParts(row as unknown as DocumentParts));
  return { documents, searchedTo: boundary && { occurredAtMs: Number(boundary[7]), eventId: boundary[2] } };
}
