import type { Queryable } from '../db/database.ts';
import { NotFoundError } from '../platform/errors.ts';
import { pageOf, rowsToRead } from '../platform/paging.ts';
import type { CursorCodec } from './cursor.ts';
import { UUID_PATTERN } from './eventFields.ts';
import type { EventFilters } from './eventFilters.ts';
import { findEventDocument, listEventDocuments, positionOf } from './eventStore.ts';

export interface ListRequest {
  readonly tenantId: string;
  readonly filters: EventFilters;
  readonly limit: number;
  readonly cursor: string | undefined;
}

/** The read side of the trail: list pages and single lookups, as serialised response bodies. */
export class EventReader {
  private readonly db: Queryable;
  private readonly cursors: CursorCodec;

  constructor(db: Queryable, cursors: CursorCodec) {
    this.db = db;
    this.cursors = cursors;
  }

  /** `{"events": [...], "page": {...}}` for one page; the events are stored JSON text, joined as they are. */
  async listPage(request: ListRequest): Promise<string> {
    const { tenantId, filters, limit } = request;
    const after = request.cursor === undefined ? undefined : this.cursors.decode(request.cursor, tenantId, filters);
    const documents = await listEventDocuments(this.db, tenantId, filters, after, rowsToRead(limit));
    const { rows, page } = pageOf(documents, limit, (last) => this.cursors.encode(positionOf(last), tenantId, filters));
    return `{"events":[${rows.join(',')}],"page":${JSON.stringify(page)}}`;
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
