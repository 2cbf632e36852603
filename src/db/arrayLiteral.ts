/**
 * Postgres array literals for batch parameters (`unnest($1::text[], ...)`). pg encodes a JavaScript array
 * element by element with two regular-expression replacements each, which was 11 % of the ingest process
 * (500 events × 15 columns per batch); here an element is copied as it is unless it holds a character that
 * needs escaping. The result is passed as one text parameter and cast by the statement.
 */

// Inside a double-quoted element only the backslash and the double quote are special.
const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;

/** `{"a","b\"c"}`: every element quoted, so empty strings, spaces, commas, braces and NULL stay text. */
export function textArrayLiteral(values: readonly string[]): string {
  let literal = '{';
  for (let index = 0; index < values.length; index += 1) {
    const value = values[index]!;
    if (index > 0) literal += ',';
    literal += NEEDS_ESCAPE.test(value) ? `"${value.replace(ESCAPED, '\\$&')}"` : `"${value}"`;
  }
  return `${literal}}`;
}

/** `{t,f}` */
export function booleanArrayLiteral(values: readonly boolean[]): string {
  let literal = '{';
  for (let index = 0; index < values.length; index += 1) {
    if (index > 0) literal += ',';
    literal += values[index] ? 't' : 'f';
  }
  return `${literal}}`;
}

/**
 * Elements joined by line feeds, for `string_to_array($n, E'\n')` in the statement: nothing to escape, for
 * columns of JSON text (a document is mostly quotes, and escaping them was 15 % of the ingest process).
 * JSON.stringify never writes a raw line feed, so JSON text cannot hold the separator; an element that
 * does, or an empty one (string_to_array reads '' as no element at all), is refused rather than split.
 */
export function lineSeparatedList(values: readonly string[]): string {
  for (const value of values) {
    if (value.length === 0 || value.includes('\n')) throw new Error('a line-separated list element is empty or holds a line feed');
  }
  return values.join('\n');
}
