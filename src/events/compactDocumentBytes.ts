import { type BinaryRows, UUID_TEXT_LENGTH } from '../db/binaryCopy.ts';
import { COMPACT_TEMPLATE, VALUE_SEPARATOR_BYTE } from './eventDocument.ts';

// A compact row's document written as bytes, for the readers that pass documents on without reading them (log
// streams): eventDocument.ts's documentOfParts puts the same document together as text.

/** COMPACT_TEMPLATE's literals as bytes, the last one without its closing brace (a caller may close it otherwise). */
const COMPACT_LITERAL_BYTES = COMPACT_TEMPLATE.literals.map((literal, index) =>
  Buffer.from(index === COMPACT_TEMPLATE.literals.length - 1 ? literal.slice(0, -1) : literal, 'utf8'),
);
const COMPACT_LITERALS_LENGTH = COMPACT_LITERAL_BYTES.reduce((sum, literal) => sum + literal.length, 0);
/** The first slot of COMPACT_TEMPLATE that is one of the row's values, not one of its four columns. */
const FIRST_VALUE_SLOT = 4;
const TRUE_BYTES = Buffer.from('true');
const FALSE_BYTES = Buffer.from('false');

/**
 * The length in bytes of the document of a compact row read with DOCUMENT_PARTS through binary COPY
 * (db/binaryCopy.ts), its columns from `first` on; undefined for a row that is not compact, whose first column
 * is the document itself. writeCompactDocument writes it.
 */
export function compactDocumentLength(row: BinaryRows, first: number): number | undefined {
  if (!row.isNull(first)) return undefined;
  if (row.isNull(first + 1)) throw new Error(`event ${row.uuid(first + 2)} has neither a document nor values`);
  return (
    COMPACT_LITERALS_LENGTH +
    // the values less their separators, if they are as many as the shape's (writeCompactDocument checks)
    (row.end(first + 1) - row.start(first + 1) - (COMPACT_TEMPLATE.values - 1)) +
    UUID_TEXT_LENGTH +
    (row.end(first + 3) - row.start(first + 3)) +
    (row.boolean(first + 4) ? TRUE_BYTES : FALSE_BYTES).length +
    (row.end(first + 5) - row.start(first + 5))
  );
}

/**
 * Writes the document of a compact row (compactDocumentLength's) into `target` at `at`, without its final
 * brace (a stream's record appends a member there first); returns where it ends. The bytes are those
 * documentOfParts' text encodes to (test/events/documents.test.ts compares them with EVENT_DOCUMENT), copied
 * straight from the row's without decoding them.
 *
 * One pass over the values, byte by byte, copying each up to its separator: a stream puts together tens of
 * thousands a second, and splitting the values first and copying each with Buffer.copy cost three times as
 * much (a call per value, each a few dozen bytes).
 */
export function writeCompactDocument(row: BinaryRows, first: number, target: Buffer, at: number): number {
  const { bytes } = row;
  const eventIdField = first + 2;
  const actionField = first + 3;
  const tenantField = first + 5;
  const phi = row.boolean(first + 4) ? TRUE_BYTES : FALSE_BYTES;
  let read = row.start(first + 1);
  const valuesEnd = row.end(first + 1);
  const { slots } = COMPACT_TEMPLATE;
  let written = at;
  for (let index = 0; index < slots.length; index += 1) {
    written = copyInto(target, written, COMPACT_LITERAL_BYTES[index]!, 0, COMPACT_LITERAL_BYTES[index]!.length);
    const slot = slots[index]!;
    if (slot >= FIRST_VALUE_SLOT) {
      while (read < valuesEnd && bytes[read] !== VALUE_SEPARATOR_BYTE) target[written++] = bytes[read++]!;
      read += 1;
    } else if (slot === 0) written += row.writeUuid(eventIdField, target, written);
    else if (slot === 1) written = copyInto(target, written, bytes, row.start(actionField), row.end(actionField));
    else if (slot === 2) written = copyInto(target, written, phi, 0, phi.length);
    else written = copyInto(target, written, bytes, row.start(tenantField), row.end(tenantField));
  }
  written = copyInto(target, written, COMPACT_LITERAL_BYTES[slots.length]!, 0, COMPACT_LITERAL_BYTES[slots.length]!.length);
  // Every value copied and none left: a separator more or less would have shifted the values under other names.
  if (read !== valuesEnd + 1 || written - at !== compactDocumentLength(row, first)) {
    const count = bytes.subarray(row.start(first + 1), valuesEnd).filter((byte) => byte === VALUE_SEPARATOR_BYTE).length + 1;
    throw new Error(`event ${row.uuid(eventIdField)} stores ${count} values, not ${COMPACT_TEMPLATE.values}`);
  }
  return written;
}

/** A compact row's instant, read from its timestamp's value (`"YYYY-MM-DDTHH:MM:SS.mmmZ"`, quotes included). */
export function compactTimestampMs(row: BinaryRows, first: number): number {
  const { bytes } = row;
  let at = row.start(first + 1);
  for (let value = 0; value < COMPACT_TEMPLATE.timestampValue; value += 1) at = bytes.indexOf(VALUE_SEPARATOR_BYTE, at) + 1;
  return timestampMsAt(bytes, at + 1);
}

/** Copies source[from, to) into target at `at`; returns where the copy ends. A loop: the parts are a few bytes. */
function copyInto(target: Buffer, at: number, source: Uint8Array, from: number, to: number): number {
  let written = at;
  for (let index = from; index < to; index += 1) target[written++] = source[index]!;
  return written;
}

/**
 * The instant of a wire timestamp (`YYYY-MM-DDTHH:MM:SS.mmmZ`, how the timestamp field is written) at `at`,
 * read from its digits without making a string of it; Date.parse of the text when it has any other form.
 */
function timestampMsAt(bytes: Uint8Array, at: number): number {
  const digits = (from: number, count: number) => {
    let value = 0;
    for (let index = from; index < from + count; index += 1) {
      const digit = bytes[index]! - 0x30;
      if (digit < 0 || digit > 9) return Number.NaN;
      value = value * 10 + digit;
    }
    return value;
  };
  const shaped =
    bytes[at + 4] === 0x2d &&
    bytes[at + 7] === 0x2d &&
    bytes[at + 10] === 0x54 &&
    bytes[at + 13] === 0x3a &&
    bytes[at + 16] === 0x3a &&
    bytes[at + 19] === 0x2e &&
    bytes[at + 23] === 0x5a;
  const instant = shaped
    ? Date.UTC(
        digits(at, 4),
        digits(at + 5, 2) - 1,
        digits(at + 8, 2),
        digits(at + 11, 2),
        digits(at + 14, 2),
        digits(at + 17, 2),
        digits(at + 20, 3),
      )
    : Number.NaN;
  return Number.isNaN(instant) ? Date.parse(Buffer.from(bytes.buffer, bytes.byteOffset + at, 24).toString('latin1')) : instant;
}
