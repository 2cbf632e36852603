import { redactionClaim } from '../client/redactedEvents.ts';

/**
 * The integrity check's view of a served document that says it was redacted (docs/retention.md
 * "Redaction"). Its content no longer hashes to its leaf, so what is checked instead: the leaf hash it
 * carries is the tree's, every field it names holds the marker, and a redaction record
 * (event_redactions, append-only, written only with an admin.event.redact event) produced exactly this
 * document. A `redaction` member added by anyone else fails the last check.
 */
export type RedactedLeafVerdict =
  | { readonly redacted: false }
  | { readonly redacted: true; readonly problem?: string; readonly unredacted?: string };

// A member of the document, never text inside a value: quotes inside string values are escaped.
const REDACTION_MEMBER = ',"redaction":{';

export function redactedLeafVerdict(served: string, storedLeafHex: string, recorded: boolean): RedactedLeafVerdict {
  if (!served.includes(REDACTION_MEMBER)) return { redacted: false };
  const event = JSON.parse(served) as Record<string, unknown>;
  const claim = redactionClaim(event);
  const { redaction: _member, ...unredacted } = event;
  if (claim === undefined) return { redacted: false };
  if (typeof claim === 'string') return { redacted: true, problem: `it is served as redacted, but ${claim}` };
  if (claim.leafHash !== storedLeafHex)
    return { redacted: true, problem: 'it is served as redacted with a leaf hash that is not its leaf' };
  if (!recorded) return { redacted: true, problem: 'it is served as redacted, but no redaction record produced this form' };
  // The document without its redaction member: what the columns render, if they agree with it.
  return { redacted: true, unredacted: JSON.stringify(unredacted) };
}
