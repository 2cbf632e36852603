import type { Database } from '../db/database.ts';
import { copyLeafDocuments } from '../events/leafChunks.ts';
import { latestTreeHead } from '../integrity/treeStore.ts';
import type { BatchLimits } from './destinations/destination.ts';
import type { ChunkPreparer } from './chunkPreparer.ts';
import type { Chunk } from './chunksAhead.ts';
import { DEFAULT_OCSF_VERSION } from './ocsf.ts';
import { treeHeadRecord } from './records.ts';
import type { DestinationInput } from './streamRules.ts';
import type { LogStream } from './streamStore.ts';

/** What a stream's chunks are read for: the stream, its destination as created, and the thread that cuts batches. */
export interface ChunkSource {
  readonly stream: LogStream;
  /** The destination as created, secrets included: what the preparer encodes the records for. */
  readonly destinationInput: DestinationInput;
  readonly preparer: ChunkPreparer;
}

/**
 * A chunk of a tenant's leaves [position, end]: the records of the events the stream's filter lets through,
 * read in one statement beside the tenant's latest tree head, cut into batches within `limits` on the
 * preparer's thread (streamWorker.ts sends them). Leaves are appended with their ranges in one transaction, so
 * a tree that had reached `end` when its size was read has them all.
 */
export async function readStreamChunk(
  db: Database,
  { stream, destinationInput, preparer }: ChunkSource,
  limits: BatchLimits,
  tenantId: string,
  position: number,
  end: number,
): Promise<Chunk> {
  const filter = { actionPrefixes: stream.filter.action_prefixes ?? [], phiInvolved: stream.filter.phi_involved };
  const [rows, head] = await Promise.all([
    copyLeafDocuments(db, tenantId, position, end - position + 1, filter),
    stream.treeHeads ? latestTreeHead(db, tenantId) : undefined,
  ]);
  const batches = await preparer.prepare({
    rows,
    destination: destinationInput,
    format: stream.format,
    ocsfVersion: stream.ocsfVersion ?? DEFAULT_OCSF_VERSION,
    span: { streamId: stream.id, tenantId, firstLeaf: position, lastLeaf: end },
    limits: { ...limits },
    head: head && treeHeadRecord(head, position),
  });
  return { start: position, end, batches };
}
