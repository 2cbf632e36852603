import type { Queryable } from '../db/database.ts';
import type { EventFilters } from './eventFilters.ts';
import { filterConditions } from './eventStore.ts';

/** Counting stops here (docs/api.md "GET /audit/events/count"): the export's cap, so "more" also means "more than one export". */
export const COUNT_CAP = 10_000;

export interface EventCount {
  /** The events the filters match, up to the cap. */
  readonly count: number;
  /** More match than the cap: the count is the cap, and the true number larger. */
  readonly capped: boolean;
}

/**
 * How many events the filters match, counted up to COUNT_CAP: at most that many index entries are read,
 * whatever the tenant's size. An action prefix comes with its members (`family`, tenantActions.ts), which
 * the action index answers one by one.
 */
export async function countEvents(
  db: Queryable,
  tenantId: string,
  filters: EventFilters,
  family?: readonly string[],
  cap = COUNT_CAP,
): Promise<EventCount> {
  const { where, values } = filterConditions(tenantId, family ? { ...filters, actionPrefix: undefined } : filters);
  if (family) {
    values.push(family);
    where.push(`e.action = ANY($${values.length}::text[])`);
  }
  values.push(cap + 1);
  const { rows } = await db.query<{ matched: number }>(
    `SELECT count(*)::int AS matched FROM (SELECT 1 FROM events e WHERE ${where.join(' AND ')} LIMIT $${values.length}::int) counted`,
    values,
  );
  const matched = rows[0]!.matched;
  return { count: Math.min(matched, cap), capped: matched > cap };
}
