import type pg from 'pg';
import { numberArrayLiteral } from '../db/arrayLiteral.ts';
import { prepared, type Queryable } from '../db/database.ts';
import { DOCUMENT_PARTS, type DocumentParts } from '../events/eventDocument.ts';
import type { DeliveryContent } from './deliveryBody.ts';
import { findAttemptTargets, type AttemptTarget } from '../webhooks/endpointSecretsStore.ts';
import { loadOperationalWork } from './operationalFanOut.ts';

/** What a delivery worker reads to make its attempts: the deliveries, their events and their endpoints. */

/** Everything a worker needs for one attempt. */
export interface DeliveryWork {
  readonly deliveryId: string;
  readonly state: string;
  readonly attempts: number;
  readonly published: boolean;
  readonly endpoint: AttemptTarget;
  /** The event's id and tenant, for the request's headers and the log. */
  readonly eventId: string;
  readonly tenantId: string;
  /**
   * What the body is made of (deliveryBody.ts): the event's parts as read, or a notice's fields. The body is
   * made at each attempt, so that a queued delivery holds only the flat texts Postgres sent: a body made at
   * load time was a tree of concatenated strings until its first signing, tens of objects per delivery
   * that lived through the young generation's collections while the delivery waited its turn.
   */
  readonly content: DeliveryContent;
}

/** A row of the work query: the delivery's columns, then the event's DOCUMENT_PARTS (array mode). */
type WorkRow = [deliveryId: string, state: string, attempts: number, published: boolean, endpointId: string, ...DocumentParts];

/**
 * Loads a batch of deliveries with their endpoint and event; ids of deleted deliveries are absent. The
 * endpoints are read by a second query, once each (endpointSecretsStore.findAttemptTargets). Deliveries of
 * operational notices (operationalFanOut.ts) are read by a third, only when some ids found no event: the
 * query of every batch stays a join with the trail.
 */
export async function loadDeliveryWork(db: Queryable, ids: readonly string[]): Promise<Map<string, DeliveryWork>> {
  // The event's parts, the body put together in Node (deliveryBody.ts) as the list puts documents
  // together: Postgres' format() of a compact row cost it more than the join did.
  const query: pg.QueryArrayConfig = {
    ...prepared(
      `SELECT d.id::text, d.state, d.attempts, d.published_at IS NOT NULL, d.endpoint_id, ${DOCUMENT_PARTS}
       FROM deliveries d
       JOIN events e ON e.tenant_id = d.tenant_id AND e.occurred_at = d.event_occurred_at AND e.event_id = d.event_id
       WHERE d.id = ANY($1::bigint[])`,
      [numberArrayLiteral(ids)],
    ),
    rowMode: 'array',
  };
  const rows = (await db.query(query)).rows as unknown as WorkRow[];
  const notices = rows.length < ids.length ? await loadOperationalWork(db, ids) : [];
  if (rows.length === 0 && notices.length === 0) return new Map();
  const endpointIds = new Set([...rows.map((row) => row[4]), ...notices.map((notice) => notice.endpointId)]);
  const endpoints = await findAttemptTargets(db, [...endpointIds]);
  const work = new Map<string, DeliveryWork>();
  for (const notice of notices) {
    const endpoint = endpoints.get(notice.endpointId);
    if (!endpoint) continue;
    const { deliveryId, state, attempts, published, event } = notice;
    work.set(deliveryId, {
      deliveryId,
      state,
      attempts,
      published,
      endpoint,
      eventId: event.eventId,
      tenantId: event.tenantId,
      content: { event },
    });
  }
  for (const row of rows) {
    const [deliveryId, state, attempts, published, endpointId, ...parts] = row;
    // An endpoint deleted between the two reads took its deliveries with it.
    const endpoint = endpoints.get(endpointId);
    if (!endpoint) continue;
    work.set(deliveryId, {
      deliveryId,
      state,
      attempts,
      published,
      endpoint,
      eventId: parts[2],
      tenantId: parts[5],
      content: { parts },
    });
  }
  return work;
}
