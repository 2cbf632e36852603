import type { Queryable } from '../db/database.ts';
import { firstLeafSince, leafIngestedAt, treeSizes } from '../integrity/treeStore.ts';
import { streamPositions, type LogStream } from './streamStore.ts';

/** How far a stream is behind the trails it follows, as its committed positions say. */
export interface StreamLag {
  /** The committed next leaf to deliver of each tenant the stream has started on. */
  readonly positions: ReadonlyMap<string, number>;
  /** Sealed leaves past the positions, filtered-out ones included, over every tenant the stream covers. */
  readonly events: number;
  /** When the oldest of them was written; undefined when the stream has delivered everything sealed. */
  readonly oldestWaitingAt: Date | undefined;
}

/**
 * A stream's lag from what Postgres holds: the API's, the CLI's and the resource status's view, and the
 * metrics' of the process delivering it, which reads it after every pass, failed ones included, so that a
 * destination that is down shows as a growing lag rather than as the lag of the last batch it took.
 */
export async function streamLag(db: Queryable, stream: LogStream): Promise<StreamLag> {
  const positions = new Map((await streamPositions(db, stream.id)).map((position) => [position.tenantId, position.nextLeaf]));
  const sizes = await treeSizes(db, stream.tenantIds ?? undefined);
  return { positions, ...(await lagPast(db, stream, sizes, positions)) };
}

/**
 * The lag past `positions` in trails of `sizes`: what streamLag reads, or what a pass of the worker has just
 * read and moved (so that a pass every second does not read both again).
 */
export async function lagPast(
  db: Queryable,
  stream: LogStream,
  sizes: ReadonlyMap<string, number>,
  positions: ReadonlyMap<string, number>,
): Promise<Omit<StreamLag, 'positions'>> {
  let events = 0;
  let oldestWaitingAt: Date | undefined;
  for (const [tenantId, size] of sizes) {
    // A tenant the stream has not started on waits from the stream's start_at.
    const next = positions.get(tenantId) ?? (await firstLeafSince(db, tenantId, stream.startAt.getTime()));
    if (next >= size) continue;
    events += size - next;
    const waiting = await leafIngestedAt(db, tenantId, next);
    if (waiting && (oldestWaitingAt === undefined || waiting < oldestWaitingAt)) oldestWaitingAt = waiting;
  }
  return { events, oldestWaitingAt };
}
