import { backoffDelay, type BackoffPolicy } from '../platform/backoff.ts';
import { systemClock, type Clock } from '../platform/clock.ts';

/**
 * The controller's work queue, with client-go's semantics (workqueue.RateLimitingInterface):
 * - a key is queued at most once, however often it is added while waiting;
 * - a key is processed by one worker at a time: added again while processing, it is queued again only
 *   when that processing is done, so work on one object is serialised;
 * - a failed key is retried after a per-key exponential backoff (base × 2^failures, capped), reset by
 *   forget() after a success.
 * Delays run on a Clock, so that its test moves time by hand.
 */
/** client-go's per-item rate limiter: 5 ms doubling to 5 minutes, without jitter. */
const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 5, maxMs: 300_000, spread: [1, 1] };

export class WorkQueue {
  private readonly backoff: BackoffPolicy;
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  /** Added while processing: queue again when done. */
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  /** Cancels the timer of each key waiting to be added. */
  private readonly delayed = new Map<string, () => void>();
  private readonly clock: Clock;
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  private shuttingDown = false;

  constructor(backoff: BackoffPolicy = DEFAULT_BACKOFF, clock: Clock = systemClock) {
    this.backoff = backoff;
    this.clock = clock;
  }

  get length(): number {
    return this.queue.length;
  }

  add(key: string): void {
    if (this.shuttingDown) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      this.processing.add(key);
      waiter(key);
      return;
    }
    this.queued.add(key);
    this.queue.push(key);
  }

  /** Adds the key after `delayMs`; a later call with a shorter delay wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    this.delayed.get(key)?.();
    const cancel = this.clock.setTimer(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    this.delayed.set(key, cancel);
  }

  /** Retries the key after its backoff; each call doubles the next delay until forget(). */
  addRateLimited(key: string): number {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    const delay = backoffDelay(this.backoff, failures + 1);
    this.addAfter(key, delay);
    return delay;
  }

  /** The key succeeded: its next failure starts from the base delay again. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** The next key to process, or undefined once the queue shuts down. Call done(key) when finished. */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.queued.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.delete(key)) this.add(key);
  }

  /** Stops handing out keys: waiting get() calls resolve with undefined; queued and delayed keys are dropped. */
  shutDown(): void {
    this.shuttingDown = true;
    for (const cancel of this.delayed.values()) cancel();
    this.delayed.clear();
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
  }
}
