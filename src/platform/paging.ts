import { ValidationError } from './errors.ts';

/**
 * Keyset paging, as every list of the public API does it (docs/api.md "Paging"): the store reads one row
 * past the page, so that has_more is known without a count, and the next cursor names the page's last row.
 * The readers differ only in their rows and their cursor codec; the arithmetic is here, once.
 */

/** The `page` object of a list response. */
export interface PageInfo {
  readonly limit: number;
  readonly returned: number;
  readonly next_cursor: string | null;
  readonly has_more: boolean;
}

/** How many rows to ask the store for: one past the page, whose presence says there is more. */
export function rowsToRead(limit: number): number {
  return limit + 1;
}

/**
 * The page of `rows` (read with rowsToRead(limit)) and its descriptor. `cursorAfter` encodes the position
 * of the page's last row; it is called only when a next page exists, so the last page costs no MAC.
 */
export function pageOf<Row>(rows: readonly Row[], limit: number, cursorAfter: (last: Row) => string): { rows: Row[]; page: PageInfo } {
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const nextCursor = hasMore && last !== undefined ? cursorAfter(last) : null;
  return { rows: page, page: { limit, returned: page.length, next_cursor: nextCursor, has_more: hasMore } };
}

/**
 * A time window [since, until) with both ends given must not be empty: a 422 on `since`, the same answer
 * on every list that takes the pair (events, export, deliveries, tree heads).
 */
export function checkTimeWindow(sinceMs: number | undefined, untilMs: number | undefined): void {
  if (sinceMs !== undefined && untilMs !== undefined && sinceMs >= untilMs) {
    throw ValidationError.single('since', 'must be earlier than until');
  }
}
