import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import type { Database } from './database.ts';
import { translateUnavailable } from './database.ts';

/**
 * `COPY (query) TO STDOUT (FORMAT binary)`: a query's rows as the bytes Postgres sends, read in place.
 *
 * For a read whose values are passed on as they are (a log stream's documents, tens of megabytes a second):
 * node-postgres decodes every value of every row into a string, and the stream then encoded the same text back
 * into its request bodies, which was most of its process' CPU (BENCHMARKS.md, "Log streams"). In binary, a text
 * value is its UTF-8 bytes, a boolean one byte, an int8 eight, a uuid sixteen; BinaryRows walks them without
 * decoding or allocating, and the caller copies what it needs. The result is the COPY's bytes as they came,
 * for BinaryRows to read here or on another thread.
 *
 * COPY takes no parameters: callers put values in with `sqlLiteral` and friends.
 */
export async function copyOutBinary(db: Database, query: string): Promise<Buffer> {
  const client = await db.connect();
  let broken: Error | undefined;
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of client.query(copyTo(`COPY (${query}) TO STDOUT (FORMAT binary)`))) chunks.push(chunk as Buffer);
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  } catch (thrown) {
    broken = thrown as Error;
    throw translateUnavailable(thrown);
  } finally {
    // A COPY that failed may have left the connection mid-protocol: it is closed rather than reused.
    client.release(broken);
  }
}

/** A text value as an SQL literal: pg's escaping, right whatever standard_conforming_strings says. */
export function sqlLiteral(text: string): string {
  return pg.escapeLiteral(text);
}

/** An integer as SQL text; anything else is a bug of the caller, refused before it reaches a statement. */
export function sqlInteger(value: number): string {
  if (!Number.isSafeInteger(value)) throw new TypeError(`not an integer: ${value}`);
  return String(value);
}

/** A boolean, or NULL for undefined, as SQL text of type boolean. */
export function sqlBoolean(value: boolean | undefined): string {
  return value === undefined ? 'NULL::boolean' : String(value);
}

/** The 11-byte signature of COPY's binary format, then a flags word and the header extension's length. */
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const MAX_FIELDS = 64;

/**
 * The rows of a binary COPY: `select(index)` makes a row the current one, and the accessors read its fields
 * where they lie in the bytes. Nothing is copied until the caller asks. Rows are found once, when the result
 * arrives, so they can be read in any order (a caller putting them in another order reorders indexes).
 */
export class BinaryRows {
  readonly bytes: Buffer;
  /** Where each row starts in `bytes`. */
  private readonly rowStarts: Int32Array;
  private fields = 0;
  /** Each field of the current row: its first byte in `bytes`, and its length (-1 for NULL). */
  private readonly starts = new Int32Array(MAX_FIELDS);
  private readonly lengths = new Int32Array(MAX_FIELDS);

  constructor(bytes: Buffer) {
    if (bytes.length < SIGNATURE.length + 8 || !bytes.subarray(0, SIGNATURE.length).equals(SIGNATURE))
      throw new Error('not the binary COPY format');
    this.bytes = bytes;
    const rowStarts: number[] = [];
    let offset = SIGNATURE.length + 8 + bytes.readInt32BE(SIGNATURE.length + 4);
    for (;;) {
      if (offset + 2 > bytes.length) throw new Error('binary COPY ended without its trailer');
      const fields = bytes.readInt16BE(offset);
      if (fields === -1) break;
      if (fields > MAX_FIELDS) throw new Error(`binary COPY row of ${fields} fields`);
      rowStarts.push(offset);
      offset += 2;
      for (let index = 0; index < fields; index += 1) {
        if (offset + 4 > bytes.length) throw new Error('binary COPY row cut short');
        offset += 4 + Math.max(0, bytes.readInt32BE(offset));
      }
    }
    if (offset > bytes.length) throw new Error('binary COPY row cut short');
    this.rowStarts = Int32Array.from(rowStarts);
  }

  get rowCount(): number {
    return this.rowStarts.length;
  }

  /** Makes row `index` (from 0) the one the accessors read. */
  select(index: number): void {
    const { bytes } = this;
    let offset = this.rowStarts[index];
    if (offset === undefined) throw new RangeError(`no row ${index} of ${this.rowStarts.length}`);
    const fields = bytes.readInt16BE(offset);
    offset += 2;
    for (let field = 0; field < fields; field += 1) {
      const length = bytes.readInt32BE(offset);
      this.starts[field] = offset + 4;
      this.lengths[field] = length;
      offset += 4 + Math.max(0, length);
    }
    this.fields = fields;
  }

  get fieldCount(): number {
    return this.fields;
  }

  isNull(field: number): boolean {
    return this.lengths[field] === -1;
  }

  /** Where the field's bytes start in `bytes`. */
  start(field: number): number {
    return this.starts[field]!;
  }

  /** Where the field's bytes end in `bytes` (exclusive). */
  end(field: number): number {
    return this.starts[field]! + Math.max(0, this.lengths[field]!);
  }

  /** An int8 or int4 field, as a number (int8 values past 2^53 lose precision, as the pool's parser does). */
  integer(field: number): number {
    const length = this.lengths[field];
    if (length === 8) return Number(this.bytes.readBigInt64BE(this.starts[field]!));
    if (length === 4) return this.bytes.readInt32BE(this.starts[field]!);
    throw new Error(`field ${field} is not an integer (${length} bytes)`);
  }

  boolean(field: number): boolean {
    return this.bytes[this.starts[field]!] === 1;
  }

  /** A text field as a string; null for NULL. */
  text(field: number): string | null {
    return this.isNull(field) ? null : this.bytes.toString('utf8', this.starts[field]!, this.end(field));
  }

  /** A uuid field as its canonical text, lower-case hex with dashes. */
  uuid(field: number): string {
    const text = Buffer.allocUnsafe(UUID_TEXT_LENGTH);
    this.writeUuid(field, text, 0);
    return text.toString('latin1', 0, UUID_TEXT_LENGTH);
  }

  /** Writes a uuid field's canonical text into `target` at `at`; returns its length, 36. */
  writeUuid(field: number, target: Buffer, at: number): number {
    let from = this.starts[field]!;
    let to = at;
    for (let index = 0; index < 16; index += 1) {
      if (index === 4 || index === 6 || index === 8 || index === 10) target[to++] = DASH;
      const byte = this.bytes[from++]!;
      target[to++] = HEX_DIGITS[byte >> 4]!;
      target[to++] = HEX_DIGITS[byte & 15]!;
    }
    return UUID_TEXT_LENGTH;
  }
}

export const UUID_TEXT_LENGTH = 36;
const DASH = 0x2d;
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');
