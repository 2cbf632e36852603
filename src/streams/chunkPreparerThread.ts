import { parentPort } from 'node:worker_threads';
import { type ChunkJob, ownedBytes, prepareChunk } from './chunkPreparation.ts';

// The thread of a ChunkPreparer (chunkPreparer.ts): each job's batches, their bodies handed back, not copied.
parentPort!.on('message', ({ id, job }: { id: number; job: ChunkJob }) => {
  try {
    const batches = prepareChunk(job).map(({ encoded, events }) => ({ encoded: { ...encoded, body: ownedBytes(encoded.body) }, events }));
    parentPort!.postMessage(
      { id, batches },
      batches.map(({ encoded }) => encoded.body.buffer as ArrayBuffer),
    );
  } catch (thrown) {
    const error = thrown instanceof Error ? thrown : new Error(String(thrown));
    parentPort!.postMessage({ id, error: { message: error.message, stack: error.stack } });
  }
});
