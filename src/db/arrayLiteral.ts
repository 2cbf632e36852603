/**
 * Postgres array literals for batch parameters (`unnest($1::text[], ...)`). pg encodes a JavaScript array
 * element by element with two regular-expression replacements each, which was 11 % of the ingest process
 * (500 events × 15 columns per batch); here an element is copied as it is unless it holds a character that
 * needs escaping. The result is passed as one text parameter and cast by the statement.
 */

// Inside a double-quoted element only the backslash and the double quote are special.
const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;

/** `{"a","b\"c",NULL}`: every element quoted, so empty strings, spaces, commas, braces and the text NULL stay text. */
export function textArrayLiteral(values: ReadonlyArray<string | null>): string {
  let literal = '{';
  for (let index = 0; index < values.length; index += 1) {
    const value = values[index]!;
    if (index > 0) literal += ',';
    if (value === null) literal += 'NULL';
    else literal += NEEDS_ESCAPE.test(value) ? `"${value.replace(ESCAPED, '\\$&')}"` : `"${value}"`;
  }
  return `${literal}}`;
}

/** `{t,f,NULL}` */
export function booleanArrayLiteral(values: ReadonlyArray<boolean | null>): string {
  let literal = '{';
  for (let index = 0; index < values.length; index += 1) {
    if (index > 0) literal += ',';
    const value = values[index];
    literal += value === null ? 'NULL' : value ? 't' : 'f';
  }
  return `${literal}}`;
}

// A decimal integer as a bigint id travels in text (node-postgres reads int8 as a string).
const INTEGER_TEXT = /^-?[0-9]+$/;

/**
 * `{1,2.5,NULL}` for `$n::int[]`, `::bigint[]` or `::float8[]`: finite numbers, and integers given as decimal text
 * (bigint ids). Anything else throws: an element is written bare, so it must be a number to Postgres.
 */
export function numberArrayLiteral(values: ReadonlyArray<number | string | null>): string {
  let literal = '{';
  for (let index = 0; index < values.length; index += 1) {
    if (index > 0) literal += ',';
    const value = values[index]!;
    if (value === null) literal += 'NULL';
    else if (typeof value === 'number' ? Number.isFinite(value) : INTEGER_TEXT.test(value)) literal += String(value);
    else throw new Error(`not a number for an array literal: ${JSON.stringify(value)}`);
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
