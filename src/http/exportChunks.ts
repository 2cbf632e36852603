/**
 * The bytes of a streamed export, gathered into chunks of about CHUNK_BYTES. Each row is encoded straight
 * into a Buffer outside V8's heap: appending the rows to a string and letting the stream encode it built a
 * chain of strings and then a flat copy of every chunk in the young generation, about as many bytes as the
 * rows themselves. Exports running beside short requests made the api collect its young generation several
 * times a second, and each collection held up the requests on the event loop (BENCHMARKS.md, issue 28
 * item 2); without that copy an export makes about half as much garbage.
 */
export class ExportChunks {
  private readonly chunkBytes: number;
  private buffer: Buffer;
  private used = 0;

  constructor(chunkBytes = CHUNK_BYTES) {
    this.chunkBytes = chunkBytes;
    this.buffer = Buffer.allocUnsafeSlow(chunkBytes);
  }

  /**
   * Appends one row's texts, in order, in the same chunk; returns the chunk gathered so far when they do not
   * fit in it, for the caller to send (a row bigger than a chunk gets a chunk of its own size).
   */
  append(first: string, second = '', third = ''): Buffer | undefined {
    const bytes = Buffer.byteLength(first) + Buffer.byteLength(second) + Buffer.byteLength(third);
    let full: Buffer | undefined;
    if (this.used + bytes > this.buffer.length) {
      if (this.used > 0) full = this.buffer.subarray(0, this.used);
      this.buffer = Buffer.allocUnsafeSlow(Math.max(this.chunkBytes, bytes));
      this.used = 0;
    }
    this.used += this.buffer.write(first, this.used);
    this.used += this.buffer.write(second, this.used);
    this.used += this.buffer.write(third, this.used);
    return full;
  }

  /** What is gathered and not yet sent. */
  rest(): Buffer {
    return this.buffer.subarray(0, this.used);
  }
}

/** About this many bytes per write: fewer writes than one per row, bounded memory. */
const CHUNK_BYTES = 64 * 1024;
