import { adminEvent, type Actor } from '../events/adminEvent.ts';
import { formatTimestamp, TENANT_ID_PATTERN, UUID_PATTERN } from '../events/eventFields.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { ConflictError, NotFoundError, ValidationError } from '../platform/errors.ts';
import { parseRedactableFields, parseReference, redactDocument, type RedactionMember } from './redaction.ts';
import { insertRedaction, lockEventForRedaction } from './redactionStore.ts';
import { systemClock } from '../platform/clock.ts';

export interface RedactionInput {
  readonly tenantId: string;
  readonly eventId: string;
  readonly fields: readonly string[];
  readonly reference: string | undefined;
}

export interface RedactionResult {
  readonly eventId: string;
  readonly fields: string[];
  /** The event's `redaction` member after this redaction (every redaction of it so far). */
  readonly redaction: RedactionMember;
}

/**
 * Redacts free-text fields of one event (docs/retention.md "Redaction"): the record, the event's new
 * served form and the `admin.event.redact` event in the tenant's trail commit together or not at all.
 * Only a sealed event is redacted: its leaf must be in the tree first, since from then on its content no
 * longer yields it.
 */
export async function redactEvent(writer: EventWriter, input: RedactionInput, actor: Actor): Promise<RedactionResult> {
  if (!TENANT_ID_PATTERN.test(input.tenantId)) throw ValidationError.single('tenant', 'must be a tenant id');
  const fields = parseRedactableFields(input.fields);
  const reference = parseReference(input.reference);
  const unknown = () => new NotFoundError(`tenant ${input.tenantId} has no event ${input.eventId}`);
  if (!UUID_PATTERN.test(input.eventId)) throw unknown();
  const eventId = input.eventId.toLowerCase();
  return writer.recordWith('redaction', async (client) => {
    const target = await lockEventForRedaction(client, input.tenantId, eventId);
    if (!target) throw unknown();
    if (target.documentVersion !== 1)
      throw new ConflictError('unsupported_document', `event ${eventId} is stored in a form this version cannot redact`);
    if (target.leafHash === undefined)
      throw new ConflictError('not_yet_sealed', `event ${eventId} is not sealed yet; redact it once it is (within SEAL_INTERVAL)`);
    const redactedAt = formatTimestamp(systemClock.now());
    const document = redactDocument(target.document, { fields, reference, redactedAt, leafHash: target.leafHash });
    await insertRedaction(client, {
      tenantId: input.tenantId,
      eventId,
      timestamp: target.timestamp,
      fields,
      reference,
      redactedAt,
      document,
    });
    const redaction = (JSON.parse(document) as { redaction: RedactionMember }).redaction;
    const event = adminEvent({
      tenantId: input.tenantId,
      action: 'admin.event.redact',
      actor,
      resourceType: 'event',
      resourceId: eventId,
      // Which fields and why, never their values.
      details: { event_id: eventId, event_timestamp: target.timestamp, fields, reference },
    });
    return { result: { eventId, fields, redaction }, events: [event] };
  });
}
