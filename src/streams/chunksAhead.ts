import type { Batch } from './batches.ts';

/** A chunk of a tenant's leaves, [start, end], as the batches that carry the events the filter lets through. */
export interface Chunk {
  readonly start: number;
  readonly end: number;
  readonly batches: readonly Batch[];
}

/** A chunk being read and put together, from its first leaf, and when its read began. */
interface ChunkAhead {
  readonly start: number;
  readonly chunk: Promise<Chunk>;
  readonly readAtMs: number;
}

/**
 * A tenant's chunks not sent yet, in leaf order from a position, read and put together while the one before is
 * sent (streams/streamWorker.ts). Chunks start every `chunkLeaves` leaves from the position, so the next one to
 * read starts where the last one queued ends, up to the tree's size.
 */
export class ChunksAhead {
  readonly tenantId: string;
  private readonly chunkLeaves: number;
  private readonly read: (start: number) => Promise<Chunk>;
  private readonly queue: ChunkAhead[];
  private nextRead: number;
  private size: number;

  /** From `position`, continuing `carried` (the pass before's) when it starts there. */
  constructor(
    tenantId: string,
    position: number,
    size: number,
    chunkLeaves: number,
    read: (start: number) => Promise<Chunk>,
    carried?: ChunksAhead,
  ) {
    this.tenantId = tenantId;
    this.chunkLeaves = chunkLeaves;
    this.read = read;
    this.size = size;
    this.queue = carried?.tenantId === tenantId && carried.queue[0]?.start === position ? [...carried.queue] : [];
    this.nextRead = this.queue.length > 0 ? this.queue.at(-1)!.start + chunkLeaves : position;
  }

  /** How many chunks are queued. */
  get queued(): number {
    return this.queue.length;
  }

  /** Whether chunks are queued, and the first of them was read within `maxAgeMs`. */
  freshWithin(maxAgeMs: number, nowMs = Date.now()): boolean {
    const first = this.queue[0];
    return first !== undefined && nowMs - first.readAtMs <= maxAgeMs;
  }

  /** Reads chunks until `ahead` are queued, or the tree ends. */
  fill(ahead: number): void {
    for (; this.queue.length < ahead && this.nextRead < this.size; this.nextRead += this.chunkLeaves) {
      const chunk = this.read(this.nextRead);
      // Awaited when its turn comes; one never sent (a failed batch before it) must not be an unhandled rejection.
      chunk.catch(() => undefined);
      this.queue.push({ start: this.nextRead, chunk, readAtMs: Date.now() });
    }
  }

  /** The next chunk, reading it if none is queued; undefined at the tree's end. */
  next(): Promise<Chunk> | undefined {
    this.fill(1);
    return this.queue.shift()?.chunk;
  }
}
