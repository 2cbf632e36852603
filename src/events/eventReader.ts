import type { Queryable } from '../db/database.ts';
import { NotFoundError } from '../platform/errors.ts';
import { pageOf, rowsToRead } from '../platform/paging.ts';
import type { CursorCodec, CursorPosition } from './cursor.ts';
import { UUID_PATTERN } from './eventFields.ts';
import type { EventFilters } from './eventFilters.ts';
import { countEvents, type EventCount } from './eventCount.ts';
import { searchEventDocuments } from './eventSearch.ts';
import { findEventDocument, listEventDocuments, positionOf } from './eventStore.ts';
import { actionsOfFamily, listTenantActions, type TenantActions } from './tenantActions.ts';

export interface ListRequest {
  readonly tenantId: string;
  readonly filters: EventFilters;
  readonly limit: number;
  readonly cursor: string | undefined;
}

/**
 * The read side of the trail: list pages and single lookups, as serialised response bodies. Pages, counts
 * and the action list may read `pages` (a read replica within its lag bound: db/replicaReads.ts); a lookup
 * always reads the primary, since a producer may look up the event it has just written.
 */
export class EventReader {
  private readonly db: Queryable;
  private readonly pages: Queryable;
  private readonly cursors: CursorCodec;

  constructor(db: Queryable, cursors: CursorCodec, pages: Queryable = db) {
    this.db = db;
    this.pages = pages;
    this.cursors = cursors;
  }

  /** `{"events": [...], "page": {...}}` for one page; the events are stored JSON text, joined as they are. */
  async listPage(request: ListRequest): Promise<string> {
    const { tenantId, filters, limit } = request;
    const after = request.cursor === undefined ? undefined : this.cursors.decode(request.cursor, tenantId, filters);
    const cursorAt = (position: CursorPosition) => this.cursors.encode(position, tenantId, filters);
    if (filters.search !== undefined) {
      const { documents, searchedTo } = await searchEventDocuments(
        this.pages,
        tenantId,
        { ...filters, search: filters.search },
        after,
        rowsToRead(limit),
      );
      const { rows, page } = pageOf(documents, limit, (last) => cursorAt(positionOf(last)));
      // A walk that stopped at its bound goes on from where it stopped (eventSearch.ts).
      const searched = searchedTo && {
        next_cursor: cursorAt(searchedTo),
        has_more: true,
        searched_to: new Date(searchedTo.occurredAtMs).toISOString(),
      };
      return `{"events":[${rows.join(',')}],"page":${JSON.stringify({ ...page, ...searched })}}`;
    }
    const family = filters.actionPrefix === undefined ? undefined : await actionsOfFamily(this.pages, tenantId, filters.actionPrefix);
    const documents = family?.length === 0 ? [] : await listEventDocuments(this.pages, tenantId, filters, after, rowsToRead(limit), family);
    const { rows, page } = pageOf(documents, limit, (last) => cursorAt(positionOf(last)));
    return `{"events":[${rows.join(',')}],"page":${JSON.stringify(page)}}`;
  }

  /** How many events the filters match, up to COUNT_CAP (a search is not counted: its walk is bounded). */
  async count(tenantId: string, filters: EventFilters): Promise<EventCount> {
    const family = filters.actionPrefix === undefined ? undefined : await actionsOfFamily(this.pages, tenantId, filters.actionPrefix);
    return family?.length === 0 ? { count: 0, capped: false } : countEvents(this.pages, tenantId, filters, family);
  }

  /** The distinct actions of the tenant's trail, for a person to pick from. */
  actions(tenantId: string): Promise<TenantActions> {
    return listTenantActions(this.pages, tenantId);
  }

  /** The event as JSON text. Unknown, malformed and other tenants' ids are the same 404 (docs/api.md). */
  async findOne(tenantId: string, eventId: string): Promise<string> {
    const notFound = () => new NotFoundError('No event with this id.');
    if (!UUID_PATTERN.test(eventId)) throw notFound();
    const json = await findEventDocument(this.db, tenantId, eventId.toLowerCase());
    if (json === undefined) throw notFound();
    return json;
  }
}
