import { canonicalJson, hashLeaf } from '../client/integrity.ts';

/**
 * The leaf hash of a stored document, as eventLeaf computes it, without parsing it in the usual case. The
 * sealer hashes every event once, and parsing then re-serialising a document was most of its work. A
 * document the write path rendered is flat, its values strings (escaping nothing but `"` and `\`, in
 * fields holding JSON) and booleans, and its members in a fixed order: its canonical form is the same member
 * texts in sorted order. Anything else (whitespace, other escapes, nested values, a repeated name) takes the
 * general path, so the result is always RFC 8785's.
 */
export function documentLeaf(document: string): Buffer {
  return hashLeaf(canonicalDocument(document));
}

/** The RFC 8785 canonical JSON of a stored document: what its leaf hashes, and an entry bundle carries. */
export function canonicalDocument(document: string): string {
  return canonicalFlatDocument(document) ?? canonicalJson(JSON.parse(document));
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** The canonical JSON of a flat document in the renderer's format; undefined when it is not in that format. */
function canonicalFlatDocument(document: string): string | undefined {
  const names: string[] = [];
  const values: string[] = [];
  if (document.charCodeAt(0) !== 0x7b /* { */) return undefined;
  let at = 1;
  for (;;) {
    if (document.charCodeAt(at) !== QUOTE) return undefined;
    const nameEnd = document.indexOf('"', at + 1);
    if (nameEnd < 0) return undefined;
    const name = document.slice(at + 1, nameEnd);
    if (name.includes('\\') || document.charCodeAt(nameEnd + 1) !== 0x3a /* : */) return undefined;
    at = nameEnd + 2;
    const valueStart = at;
    const first = document.charCodeAt(at);
    if (first === QUOTE) {
      at += 1;
      for (;;) {
        const code = document.charCodeAt(at);
        if (Number.isNaN(code) || code < 0x20) return undefined;
        if (code === QUOTE) break;
        if (code === BACKSLASH) {
          const escaped = document.charCodeAt(at + 1);
          if (escaped !== QUOTE && escaped !== BACKSLASH) return undefined;
          at += 2;
        } else {
          at += 1;
        }
      }
      at += 1;
    } else if (document.startsWith('true', at)) {
      at += 4;
    } else if (document.startsWith('false', at)) {
      at += 5;
    } else {
      return undefined;
    }
    names.push(name);
    values.push(document.slice(valueStart, at));
    const separator = document.charCodeAt(at);
    if (separator === 0x7d /* } */) {
      if (at !== document.length - 1) return undefined;
      break;
    }
    if (separator !== 0x2c /* , */) return undefined;
    at += 1;
  }
  const order = sortedOrder(names);
  if (!order) return undefined;
  let text = '{';
  for (let index = 0; index < order.length; index += 1) {
    const member = order[index]!;
    text += `${index === 0 ? '' : ','}"${names[member]}":${values[member]}`;
  }
  return `${text}}`;
}

// Every document of one renderer has the same names in the same order: the permutation is kept.
let lastNames: string[] = [];
let lastOrder: number[] = [];

/** Indexes of the names in sorted order (UTF-16 code units, as RFC 8785); undefined if a name repeats. */
function sortedOrder(names: string[]): number[] | undefined {
  if (names.length === lastNames.length && names.every((name, index) => name === lastNames[index])) return lastOrder;
  const order = names.map((_, index) => index).sort((a, b) => (names[a]! < names[b]! ? -1 : names[a]! > names[b]! ? 1 : 0));
  for (let index = 1; index < order.length; index += 1) if (names[order[index]!] === names[order[index - 1]!]) return undefined;
  if (names.some((name) => !name.isWellFormed())) return undefined;
  lastNames = names;
  lastOrder = order;
  return order;
}
