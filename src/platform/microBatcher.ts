import { coerceError } from './errors.ts';
import { systemClock, type Clock } from './clock.ts';

export interface MicroBatcherOptions<T> {
  /** A batch is written as soon as this many items wait ... */
  readonly size: number;
  /** ... or this long after the first of them arrived, whichever comes first. */
  readonly lingerMs: number;
  /** Items one write takes at most; `size` by default. */
  readonly maxBatch?: number;
  /** Writes at once; 1 (serialised) by default. Infinity lets every batch start when it is due. */
  readonly concurrency?: number;
  readonly write: (batch: T[]) => Promise<void>;
  /** A write that threw: its batch is the caller's to give back. The batcher carries on. */
  readonly onError: (error: Error, batch: T[]) => void;
  readonly clock?: Clock;
}

/**
 * Groups items into batches, each written by one call (one transaction, one query): a batch goes when
 * `size` items wait or `lingerMs` after the first, so a trickle waits at most the linger and a flood makes
 * full batches. A batch is taken when its write starts, not when it was asked for: while every write slot
 * is busy what arrives accumulates, and under load the batches grow instead of queueing up as many small
 * writes. What arrives during a write waits for its own trigger (a full batch, or the linger).
 *
 * Used by JetStream ingest (event writes), the delivery worker (loads) and the outcome recorder.
 */
export class MicroBatcher<T> {
  private readonly options: MicroBatcherOptions<T>;
  private readonly clock: Clock;
  private readonly maxBatch: number;
  private readonly concurrency: number;
  private buffer: T[] = [];
  private readonly writing = new Set<Promise<void>>();
  private cancelLinger: (() => void) | undefined;
  /** A batch was due while every slot was busy: it starts when one frees. */
  private due = false;
  private readonly roomWaiters = new Set<() => void>();

  constructor(options: MicroBatcherOptions<T>) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.maxBatch = options.maxBatch ?? options.size;
    this.concurrency = options.concurrency ?? 1;
  }

  /** Items waiting for a write (not those being written). */
  get waiting(): number {
    return this.buffer.length;
  }

  /** `now`: something waits for this item's write, so it goes without the linger (after a write in progress). */
  add(item: T, now = false): void {
    this.buffer.push(item);
    if (now || this.buffer.length >= this.options.size) this.startWrite();
    else this.armLinger();
  }

  /**
   * Resolves once fewer than `size` items wait: a producer that awaits it after each add is held back while
   * every write slot is busy and a full batch waits (backpressure), and goes on at once otherwise.
   */
  room(): Promise<void> {
    if (this.buffer.length < this.options.size) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.add(resolve));
  }

  /** Writes everything waiting, whatever its size, and resolves when no write is left in progress. */
  async drain(): Promise<void> {
    while (this.buffer.length > 0 || this.writing.size > 0) {
      if (this.buffer.length > 0) this.startWrite();
      await Promise.allSettled([...this.writing]);
    }
  }

  /** Takes back what waits (it will not be written) and cancels the linger. */
  takeWaiting(): T[] {
    this.cancelLinger?.();
    this.cancelLinger = undefined;
    this.due = false;
    const taken = this.buffer;
    this.buffer = [];
    this.notifyRoom();
    return taken;
  }

  /** Resolves when the writes in progress have settled (what waits is left waiting). */
  async idle(): Promise<void> {
    while (this.writing.size > 0) await Promise.allSettled([...this.writing]);
  }

  private armLinger(): void {
    this.cancelLinger ??= this.clock.setTimer(() => {
      this.cancelLinger = undefined;
      this.startWrite();
    }, this.options.lingerMs);
  }

  private startWrite(): void {
    this.cancelLinger?.();
    this.cancelLinger = undefined;
    if (this.writing.size >= this.concurrency) {
      this.due = true;
      return;
    }
    this.due = false;
    const batch = this.buffer.splice(0, this.maxBatch);
    this.notifyRoom();
    if (batch.length === 0) return;
    const write: Promise<void> = this.run(batch).finally(() => {
      this.writing.delete(write);
      this.afterWrite();
    });
    this.writing.add(write);
  }

  private async run(batch: T[]): Promise<void> {
    try {
      await this.options.write(batch);
    } catch (thrown) {
      this.options.onError(coerceError(thrown), batch);
    }
  }

  private afterWrite(): void {
    if (this.due || this.buffer.length >= this.options.size) this.startWrite();
    else if (this.buffer.length > 0) this.armLinger();
  }

  private notifyRoom(): void {
    if (this.buffer.length >= this.options.size) return;
    for (const resolve of this.roomWaiters) resolve();
    this.roomWaiters.clear();
  }
}
