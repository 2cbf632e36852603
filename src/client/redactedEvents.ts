/**
 * Redacted events as a verifier sees them (docs/retention.md "Redaction"). A redacted event no longer
 * hashes to its leaf: values were replaced by the marker after it was sealed. What remains provable is
 * its position and its leaf (the `redaction` member carries the leaf hash as sealed, which the inclusion
 * proof proves), and that the redaction was recorded: each one is an `admin.event.redact` event of the
 * same trail, whose own content does verify. What cannot be proven any more is the redacted content.
 *
 * Dependency-free: part of the client package.
 */

/** What a redacted value is replaced with. */
export const REDACTION_MARKER = '[redacted]';

export interface RedactionClaim {
  readonly fields: readonly string[];
  readonly leafHash: string;
  readonly references: readonly string[];
}

const LEAF_HASH = /^[0-9a-f]{64}$/;

/**
 * The redaction an event says it had: undefined when it has no `redaction` member, a reason when the member
 * is malformed or the event does not hold the marker in every field it names (then it is not a redaction).
 */
export function redactionClaim(event: Record<string, unknown>): RedactionClaim | string | undefined {
  const member = event.redaction;
  if (member === undefined) return undefined;
  const { fields, leaf_hash: leafHash, history } = (member ?? {}) as Record<string, unknown>;
  if (!Array.isArray(fields) || fields.length === 0 || !fields.every((field) => typeof field === 'string'))
    return 'its redaction member names no fields';
  if (typeof leafHash !== 'string' || !LEAF_HASH.test(leafHash)) return 'its redaction member has no leaf hash';
  for (const field of fields as string[]) {
    if (valueAt(event, field) !== REDACTION_MARKER) return `it claims ${field} is redacted but does not hold the marker there`;
  }
  const references = Array.isArray(history) ? history.map((step) => String((step as { reference?: unknown })?.reference)) : [];
  return { fields: fields as string[], leafHash, references };
}

/** The value of `justification` or `details.a.b` (inside the JSON text of details). */
function valueAt(event: Record<string, unknown>, field: string): unknown {
  if (field === 'justification') return event.justification;
  const [head, ...path] = field.split('.');
  if (head !== 'details' || path.length === 0 || typeof event.details !== 'string') return undefined;
  let node: unknown;
  try {
    node = JSON.parse(event.details);
  } catch {
    return undefined;
  }
  for (const key of path) {
    if (typeof node !== 'object' || node === null || Array.isArray(node) || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** A redacted event whose position and leaf were proven; its content no longer can be. */
export interface RedactedEventReport {
  eventId: string;
  fields: readonly string[];
  references: readonly string[];
  /** Whether admin.event.redact events of the export, themselves proven, record every redacted field. */
  recorded: boolean;
}

/**
 * Each redaction should be recorded by admin.event.redact events of the same trail, whose content is
 * proven. An export of the whole trail holds them, so there an unrecorded redaction is a failure (content
 * changed under the cover of a redaction); a filtered export may not, and reports it as unrecorded.
 */
export function checkRedactions(
  redacted: ReadonlyArray<{ eventId: string; claim: RedactionClaim }>,
  provenEvents: ReadonlyArray<Record<string, unknown>>,
  complete: boolean,
): { reports: RedactedEventReport[]; failures: Array<{ eventId: string; reason: string }> } {
  const failures: Array<{ eventId: string; reason: string }> = [];
  if (redacted.length === 0) return { reports: [], failures };
  const recorded = recordedRedactions(provenEvents);
  const reports = redacted.map(({ eventId, claim }) => {
    const fields = recorded.get(eventId);
    const missing = claim.fields.filter((field) => !fields?.has(field));
    if (complete && missing.length > 0) {
      failures.push({
        eventId,
        reason: `it is served redacted (${missing.join(', ')}) but no proven admin.event.redact event of the export records that redaction`,
      });
    }
    return { eventId, fields: claim.fields, references: claim.references, recorded: missing.length === 0 };
  });
  return { reports, failures };
}

/**
 * The fields each event's recorded redactions cover, from the `admin.event.redact` events among `events`
 * (pass only events whose own content was proven): event id → fields.
 */
function recordedRedactions(events: Iterable<Record<string, unknown>>): Map<string, Set<string>> {
  const recorded = new Map<string, Set<string>>();
  for (const event of events) {
    if (event.action !== 'admin.event.redact' || typeof event.details !== 'string') continue;
    let details: { event_id?: unknown; fields?: unknown };
    try {
      details = JSON.parse(event.details) as typeof details;
    } catch {
      continue;
    }
    if (typeof details.event_id !== 'string' || !Array.isArray(details.fields)) continue;
    const fields = recorded.get(details.event_id) ?? new Set<string>();
    for (const field of details.fields) if (typeof field === 'string') fields.add(field);
    recorded.set(details.event_id, fields);
  }
  return recorded;
}
