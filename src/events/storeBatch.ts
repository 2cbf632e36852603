import { prepared, type Queryable } from '../db/database.ts';
import type { NewEvent, StoredEventKey } from '../events/eventStore.ts';
import { eventColumnArrays, INSERT_EVENTS } from './eventInsert.ts';
import type { StoredForm } from './storedFormSetting.ts';

/**
 * Who publishes the deliveries a write records: the relays, which claim them from the outbox (written
 * unpublished, and the statement wakes them), or the writer itself once the statement has committed
 * (written marked published, as a relay's claim would mark them).
 */
export type FanOutPublisher = 'relay' | 'writer';

/**
 * What the write statement records beside the events it stores: their webhook deliveries, as SQL the
 * statement embeds (delivery/fanOut.ts provides it; declared here because the trail does not depend on
 * delivery). Events and their deliveries are then one statement, so no path can store an event and skip
 * its deliveries, and the trail never reads the tables behind them.
 */
export interface DeliveryFanOut {
  /**
   * Common table expressions that follow `stored` in the statement's WITH list: `stored` is a relation with
   * the columns tenant_id, event_id, action and occurred_at, and those its served document is put together
   * from (eventInsert.storedDocument); `tenants` a text[] expression holding every tenant of the batch.
   */
  clauses(stored: string, tenants: string, publisher: FanOutPublisher): string;
  /**
   * Items of the statement's select list, each evaluated once per statement. For the writer as publisher one
   * is named `delivery_ids` and holds the ids (text[]) of the new deliveries it is to publish on the first
   * row; the others wake the relays, and their values are ignored.
   */
  selected(publisher: FanOutPublisher): string;
}

const STORED_KEYS = `tenant_id, event_id, (extract(epoch FROM occurred_at) * 1000)::int8 AS occurred_at_ms`;

/**
 * A batch's whole write as one statement: the events, and from the rows the insert actually stored (so a
 * producer's retry fans out nothing) their deliveries. One statement is atomic without BEGIN and COMMIT, so
 * a batch is one round trip instead of four, and the batch's rows reach Postgres once.
 */
export class BatchStatements {
  private readonly statements: Readonly<Record<`${StoredForm} ${FanOutPublisher}`, string>>;

  constructor(fanOut: DeliveryFanOut) {
    const statement = (form: StoredForm, publisher: FanOutPublisher) =>
      `WITH stored AS (${INSERT_EVENTS[form]}), ${fanOut.clauses('stored', '$1::text[]', publisher)}
  SELECT ${STORED_KEYS}, ${fanOut.selected(publisher)}
  FROM stored`;
    this.statements = {
      'compact relay': statement('compact', 'relay'),
      'compact writer': statement('compact', 'writer'),
      'full relay': statement('full', 'relay'),
      'full writer': statement('full', 'writer'),
    };
  }

  /** Stores the events not stored before, in `form`, and records their deliveries, for `publisher` to publish. */
  async store(
    db: Queryable,
    batch: { readonly events: readonly NewEvent[]; readonly timestamps: readonly string[]; readonly form: StoredForm },
    publisher: FanOutPublisher,
  ): Promise<StoredBatch> {
    const { events, timestamps, form } = batch;
    if (events.length === 0) return { stored: [], deliveryIds: [] };
    const { rows } = await db.query<{ tenant_id: string; event_id: string; occurred_at_ms: number; delivery_ids?: string[] | null }>(
      prepared(this.statements[`${form} ${publisher}`], eventColumnArrays(events, timestamps, form)),
    );
    return {
      stored: rows.map((row) => ({ tenantId: row.tenant_id, eventId: row.event_id, occurredAtMs: row.occurred_at_ms })),
      deliveryIds: publisher === 'writer' ? (rows[0]?.delivery_ids ?? []) : [],
    };
  }
}

export interface StoredBatch {
  /** The keys of the rows stored (not those of repeats). */
  readonly stored: StoredEventKey[];
  /** With the writer as publisher, the deliveries recorded, marked published; otherwise none. */
  readonly deliveryIds: string[];
}
