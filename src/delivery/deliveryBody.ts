import {
  buildEnvelope,
  deliveredEventOf,
  ENVELOPE_SCHEMA_VERSION,
  envelopeDetails,
  type DeliveredEvent,
} from '../client/webhookEnvelope.ts';
import type { AuditEvent, AuditEventFieldName } from '../client/auditEvent.ts';
import { compactValuePosition, compactValueTexts, documentOfParts, type DocumentParts } from '../events/eventDocument.ts';

/** What a delivery's body is made of: a stored event's DOCUMENT_PARTS, or an operational notice's fields. */
export type DeliveryContent = { readonly parts: Readonly<DocumentParts> } | { readonly event: DeliveredEvent };

/** The body of an attempt: the same bytes at every attempt of a delivery. */
export function deliveryBody(content: DeliveryContent): string {
  return 'parts' in content ? deliveryBodyOfParts(content.parts) : buildEnvelope(content.event);
}

/**
 * A delivery's body from the stored event as the worker reads it (DOCUMENT_PARTS): the bytes buildEnvelope
 * makes of the served document, every attempt alike. A compact row's values are already the JSON texts of
 * its fields, written by JSON.stringify or by Postgres byte for byte alike (eventDocument.ts), so the
 * envelope is put together from them around the three texts that need no escaping (the action, the id and
 * the tenant, written from columns), and only `details` is parsed (it becomes an object): parsing the whole
 * document and writing the envelope again cost the worker a few µs per delivery (BENCHMARKS.md). Any other
 * row (a redacted event's stored document, a later version's, one with columns only) goes through the parse.
 * test/webhooks/delivery-body.test.ts compares both ways on every kind of row.
 */
export function deliveryBodyOfParts(parts: Readonly<DocumentParts>): string {
  const texts = compactValueTexts(parts);
  if (texts === undefined) return buildEnvelope(deliveredEventOf(JSON.parse(documentOfParts(parts)) as AuditEvent));
  const [, , eventId, action, phiInvolved, tenantId] = parts;
  return (
    `{"type":"${action}","id":"${eventId}","timestamp":${texts[AT.timestamp]!},"tenant_id":"${tenantId}",` +
    `"actor":{"user_id":${texts[AT.user_id]!},"user_role":${texts[AT.user_role]!}},` +
    `"resource":{"type":${texts[AT.resource_type]!},"id":${texts[AT.resource_id]!}},` +
    `"phi_involved":${phiInvolved ? 'true' : 'false'},"success":${texts[AT.success]!},` +
    `"details":${envelopeDetails(JSON.parse(texts[AT.details]!) as string)},"schema_version":"${ENVELOPE_SCHEMA_VERSION}"}`
  );
}

/** Where each field the envelope takes from a compact row's values sits among them. */
const AT = {
  timestamp: positionOf('timestamp'),
  user_id: positionOf('user_id'),
  user_role: positionOf('user_role'),
  resource_type: positionOf('resource_type'),
  resource_id: positionOf('resource_id'),
  success: positionOf('success'),
  details: positionOf('details'),
};

function positionOf(name: AuditEventFieldName): number {
  const position = compactValuePosition(name);
  if (position === undefined) throw new Error(`${name} is not among a compact row's values`);
  return position;
}
