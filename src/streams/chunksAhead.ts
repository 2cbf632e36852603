import type { Batch } from './batches.ts';
import { systemClock } from '../platform/clock.ts';

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
 * sent (streams/streamWorker.ts). A chunk is `chunkLeaves` leaves, or fewer at the tree's end; the next one to
 * read starts where the last one queued ends. A chunk carried from the pass before may have ended at that
 * pass's tree size, shorter than the tree now: the next read starts right after it, not a chunk's length on.
 */
export class ChunksAhead {
  readonly tenantId: string;
  private readonly chunkLeaves: number;
  private readonly read: (start: number, end: number) => Promise<Chunk>;
  private readonly queue: ChunkAhead[];
  private readonly size: number;
  /** The first leaf after the last chunk queued (or the position, when none is). */
  private nextRead: number;

  /** From `position`, continuing `carried` (the pass before's) when it starts there. */
  constructor(
    tenantId: string,
    position: number,
    size: number,
    chunkLeaves: number,
    read: (start: number, end: number) => Promise<Chunk>,
    carried?: ChunksAhead,
  ) {
    this.tenantId = tenantId;
    this.chunkLeaves = chunkLeaves;
    this.read = read;
    this.size = size;
    const continues = carried?.tenantId === tenantId && carried.queue[0]?.start === position;
    this.queue = continues ? [...carried.queue] : [];
    this.nextRead = continues ? carried.nextRead : position;
  }

  /** How many chunks are queued. */
  get queued(): number {
    return this.queue.length;
  }

  /** Whether chunks are queued, and the first of them was read within `maxAgeMs`. */
  freshWithin(maxAgeMs: number, nowMs = systemClock.now()): boolean {
    const first = this.queue[0];
    return first !== undefined && nowMs - first.readAtMs <= maxAgeMs;
  }

  /** Reads chunks [start, end] until `ahead` are queued, or the tree ends. */
  fill(ahead: number): void {
    while (this.queue.length < ahead && this.nextRead < this.size) {
      const start = this.nextRead;
      const end = Math.min(start + this.chunkLeaves, this.size) - 1;
      const chunk = this.read(start, end);
      // Awaited when its turn comes; one never sent (a failed batch before it) must not be an unhandled rejection.
      chunk.catch(() => undefined);
      this.queue.push({ start, chunk, readAtMs: systemClock.now() });
      this.nextRead = end + 1;
    }
  }

  /** The next chunk, reading it if none is queued; undefined at the tree's end. */
  next(): Promise<Chunk> | undefined {
    this.fill(1);
    return this.queue.shift()?.chunk;
  }
}
