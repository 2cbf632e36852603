/**
 * RFC 8785 canonical JSON, the form the trail's Merkle leaves and signed tree heads hash. Plain
 * ECMAScript with no import, so that the same code runs in Node (the client's verifier) and in the
 * browser (the customer portal's "verify this event").
 */

/**
 * RFC 8785 (JCS) canonical JSON of a value parsed from JSON: object members sorted by the UTF-16 code
 * units of their names, no whitespace, strings and numbers serialised as ECMAScript's JSON.stringify does
 * (which is what RFC 8785 §3.2.2 prescribes). Strings that are not well-formed Unicode are refused, as
 * RFC 8785 requires I-JSON input.
 */
export function canonicalJson(value: unknown): string {
  switch (typeof value) {
    case 'string':
      if (!value.isWellFormed()) throw new TypeError('canonical JSON: a string holds an unpaired surrogate');
      // Most strings need no escape; quoting them directly is what JSON.stringify would write, faster.
      return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`;
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonical JSON: numbers must be finite');
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        let text = '[';
        for (let index = 0; index < value.length; index += 1) text += (index === 0 ? '' : ',') + canonicalJson(value[index]);
        return `${text}]`;
      }
      return canonicalObject(value as Record<string, unknown>);
    }
    default:
      throw new TypeError(`canonical JSON: cannot serialise a ${typeof value}`);
  }
}

/** An object's canonical JSON, leaving out the members named in `omit`. */
export function canonicalObject(record: Record<string, unknown>, omit?: ReadonlySet<string>): string {
  let text = '{';
  for (const [name, quoted] of sortedMembers(record)) {
    const member = record[name];
    if (member === undefined || omit?.has(name)) continue;
    text += `${(text.length === 1 ? '' : ',') + quoted}:${canonicalJson(member)}`;
  }
  return `${text}}`;
}

// What JSON.stringify escapes in a string: the quote, the backslash and the C0 controls (RFC 8785 §3.2.2.2).
// biome-ignore lint/suspicious/noControlCharactersInRegex: the C0 controls are exactly what must be escaped.
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

// Events all have the same members in the same order: the sorted, quoted names of the last object shape
// are kept, so that canonicalising an export or a batch sorts once rather than once per event.
let lastNames: string[] = [];
let lastSorted: Array<[string, string]> = [];

function sortedMembers(record: Record<string, unknown>): Array<[string, string]> {
  const names = Object.keys(record);
  if (names.length === lastNames.length && names.every((name, index) => name === lastNames[index])) return lastSorted;
  const sorted = [...names].sort().map((name): [string, string] => [name, canonicalJson(name)]);
  lastNames = names;
  lastSorted = sorted;
  return sorted;
}
