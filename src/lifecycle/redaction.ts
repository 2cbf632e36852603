import type { EventRedaction } from '../client/auditEvent.ts';
import { REDACTION_MARKER } from '../client/redactedEvents.ts';
import { ValidationError, type FieldProblem } from '../platform/errors.ts';

/**
 * Redaction of personal data a producer put into free text (docs/retention.md "Redaction"): the pure part,
 * which fields may be redacted and the event's served form afterwards. The database applies it
 * (lifecycle/redactionStore.ts, migrations/018_event_redactions.sql) and checks the same rules again.
 */

/** What a redacted value becomes, in the served document and in the columns (the client package's constant). */
export { REDACTION_MARKER };

/**
 * Only free text a producer supplies may be redacted: the justification and values inside `details`
 * (`details.patient_name`, `details.patient.name`). Ids, the tenant, the action, the actor, the resource,
 * the timestamp, the addresses, the flags and fields_accessed (names of fields, not their values) never
 * are: they are what an auditor needs to know happened.
 */
const DETAILS_PATH = /^details(\.[^.]+)+$/;
const MAX_FIELDS = 50;

/** The `redaction` member of a redacted event as served. */
export type RedactionMember = EventRedaction;

/** The fields asked for, checked and without repeats; a ValidationError names each one refused. */
export function parseRedactableFields(fields: readonly string[]): string[] {
  const problems: FieldProblem[] = [];
  const unique = [...new Set(fields.map((field) => field.trim()).filter((field) => field !== ''))];
  if (unique.length === 0) problems.push({ field: 'fields', message: 'must name at least one field' });
  if (unique.length > MAX_FIELDS) problems.push({ field: 'fields', message: `must name at most ${MAX_FIELDS} fields` });
  for (const field of unique) {
    if (field !== 'justification' && !DETAILS_PATH.test(field)) {
      problems.push({
        field: 'fields',
        message: `${field} may not be redacted: only justification and values of details (details.<key>) can be`,
      });
    }
  }
  if (problems.length > 0) throw new ValidationError(problems, problems.map((problem) => problem.message).join('; '));
  return unique;
}

export function parseReference(reference: string | undefined): string {
  const trimmed = reference?.trim() ?? '';
  if (trimmed === '' || trimmed.length > 200)
    throw ValidationError.single('reference', 'must be 1-200 characters naming the request (a ticket number, not personal data)');
  return trimmed;
}

export interface RedactionRequest {
  readonly fields: readonly string[];
  readonly reference: string;
  /** Wire form, milliseconds. */
  readonly redactedAt: string;
  /** The event's sealed leaf hash, lowercase hex. */
  readonly leafHash: string;
}

/**
 * The served document after redacting `request.fields` of `served` (the document as served now, perhaps
 * redacted before): the same members in the same order with the marker in place of each value, and the
 * `redaction` member appended or extended. A field the event lacks, or one already redacted, is refused:
 * nothing is changed.
 */
export function redactDocument(served: string, request: RedactionRequest): string {
  const event = JSON.parse(served) as Record<string, unknown>;
  const previous = event.redaction as RedactionMember | undefined;
  const problems: FieldProblem[] = [];
  const already = new Set(previous?.fields ?? []);
  let details: Record<string, unknown> | undefined;
  for (const field of request.fields) {
    if (already.has(field)) {
      problems.push({ field: 'fields', message: `${field} is already redacted` });
    } else if (field === 'justification') {
      if (typeof event.justification !== 'string' || event.justification === '')
        problems.push({ field: 'fields', message: 'the event has no justification' });
      else event.justification = REDACTION_MARKER;
    } else {
      details ??= JSON.parse(event.details as string) as Record<string, unknown>;
      if (!replaceAtPath(details, field.split('.').slice(1))) problems.push({ field: 'fields', message: `the event has no ${field}` });
    }
  }
  if (problems.length > 0) throw new ValidationError(problems, problems.map((problem) => problem.message).join('; '));
  if (details) event.details = JSON.stringify(details);
  const step = { fields: [...request.fields], redacted_at: request.redactedAt, reference: request.reference };
  const redaction: RedactionMember = {
    fields: [...(previous?.fields ?? []), ...request.fields],
    leaf_hash: previous?.leaf_hash ?? request.leafHash,
    history: [...(previous?.history ?? []), step],
  };
  // Reassigned rather than added when present, so that it stays the last member either way.
  delete event.redaction;
  event.redaction = redaction;
  // The other members are strings and booleans in the renderer's order: JSON.stringify writes them as
  // they were written (events/eventDocument.ts renders with the same escaping).
  return JSON.stringify(event);
}

/** Sets the value at `path` (object keys) to the marker; false when there is no such value. */
function replaceAtPath(object: Record<string, unknown>, path: readonly string[]): boolean {
  let node: unknown = object;
  for (const key of path.slice(0, -1)) {
    if (!isObject(node) || !Object.hasOwn(node, key)) return false;
    node = node[key];
  }
  const last = path.at(-1)!;
  if (!isObject(node) || !Object.hasOwn(node, last)) return false;
  node[last] = REDACTION_MARKER;
  return true;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
