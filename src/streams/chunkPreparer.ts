import { Worker } from 'node:worker_threads';
import type { Batch } from './batches.ts';
import { type ChunkJob, ownedBytes } from './chunkPreparation.ts';

/**
 * Puts chunks of the trail together into batches (chunkPreparation.ts: records from the rows' bytes, bodies
 * framed and gzipped) on a thread of its own, one per streams process, the streams' event loop only reading
 * chunks and sending batches. On the event loop, that work held it for most of a backfill's time (893 of
 * 1,289 ms of a round), and batch answers and zlib's callbacks waited behind it (BENCHMARKS.md, "Log streams'
 * throughput: the batches put together on a thread of their own").
 *
 * Jobs are answered in the order given. A job that throws rejects with the thread's error; a thread that dies
 * rejects what it had and is started again by the next job.
 */
export class ChunkPreparer {
  private thread: Worker | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (batches: Batch[]) => void; reject: (error: Error) => void }>();
  private closed = false;

  /** The job's batches. Its rows are handed to the thread: the caller must not use them afterwards. */
  prepare(job: ChunkJob): Promise<Batch[]> {
    if (this.closed) return Promise.reject(new Error('the chunk preparer is closed'));
    const id = this.nextId++;
    const rows = ownedBytes(job.rows);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      try {
        this.started().postMessage({ id, job: { ...job, rows } }, [rows.buffer as ArrayBuffer]);
      } catch (error) {
        // A job that cannot be handed over (nothing of ours should be): only it fails.
        this.pending.delete(id);
        reject(error);
      }
    });
  }

  /** Starts the thread ahead of the first job (it takes a few hundred milliseconds to load). */
  start(): void {
    if (!this.closed) this.started();
  }

  async close(): Promise<void> {
    this.closed = true;
    const thread = this.thread;
    this.thread = undefined;
    this.failAll(new Error('the chunk preparer is closed'));
    await thread?.terminate();
  }

  private started(): Worker {
    if (this.thread) return this.thread;
    const extension = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
    const thread = new Worker(new URL(`./chunkPreparerThread.${extension}`, import.meta.url));
    // The streams role's lifecycle ends the process; an idle thread must not keep it alive.
    thread.unref();
    thread.on('message', (message: { id: number; batches?: Batch[]; error?: { message: string; stack?: string } }) => {
      const waiting = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (!waiting) return;
      if (message.error) waiting.reject(Object.assign(new Error(message.error.message), { stack: message.error.stack }));
      else
        waiting.resolve(message.batches!.map(({ encoded, events }) => ({ encoded: { ...encoded, body: bufferOf(encoded.body) }, events })));
    });
    thread.on('error', (error) => this.lost(thread, error));
    thread.on('exit', (code) => this.lost(thread, new Error(`the chunk preparation thread exited with code ${code}`)));
    this.thread = thread;
    return thread;
  }

  private lost(thread: Worker, error: Error): void {
    if (this.thread !== thread) return;
    this.thread = undefined;
    this.failAll(error);
  }

  private failAll(error: Error): void {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}

/** A Buffer over the bytes a thread handed over (they arrive as a Uint8Array), without copying them. */
function bufferOf(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
