/**
 * Long reads yield to short requests (issue 28, item 2). A long read (an export) streams for as long as its
 * client reads, and on a small pod two of them keep the event loop and Postgres busy enough that a list
 * beside them took five times its usual p99: it queued behind the exports' chunks on the one event loop,
 * and its query shared the cores with their FETCHes. Bounding the exports' connections (LongReads) did not
 * help, since what they took was time, not connections.
 *
 * So a long read asks for its turn before each chunk it sends (`turn()`): when short requests are in flight
 * it waits until those requests have ended, not the ones that began later, so a steady stream of requests
 * cannot hold it back for ever. Nothing is fetched, rendered or written by a long read meanwhile, which
 * leaves the event loop and the cores to the short requests. Two bounds keep long reads going whatever the
 * short requests do (a client sending a body slowly holds a request open for as long as it likes):
 *
 * - one wait lasts at most `maxWaitMs`;
 * - a long read spends at most `maxShare` of its time waiting (it may wait once it has earned it by
 *   running), so an export takes at most 1 / (1 - maxShare) of the time it would take without yielding.
 *
 * Pure bookkeeping and timers, no I/O. The caller ends each short request it began, exactly once.
 */

export interface LongReadYieldLimits {
  /** The longest one wait for short requests; 0 turns yielding off. */
  readonly maxWaitMs: number;
  /** The most of a long read's time that it may spend waiting, in [0, 1). */
  readonly maxShare: number;
}

export interface LongReadYieldObserver {
  /** A long read began (+1) or ended (-1) a wait for short requests. */
  yielding(delta: 1 | -1): void;
  /** A long read waited this long for short requests to end. */
  yielded(seconds: number): void;
  /** A long read went on beside short requests: it had spent its share of time waiting. */
  declined(): void;
}

/** One long read's turns, and its account of time spent running and waiting. */
export interface LongReadTurns {
  /** Resolves when the long read may send its next chunk: at once (undefined) when no short request is in flight. */
  turn(): Promise<void> | undefined;
  /** How long it has waited for short requests in all, in milliseconds. */
  waitedMs(): number;
}

interface Waiter {
  /** Ends the wait once every short request up to this one (by number) has ended. */
  readonly through: number;
  readonly resolve: () => void;
}

export class LongReadYield {
  private readonly limits: LongReadYieldLimits;
  private observer: LongReadYieldObserver | undefined;
  /** Short requests in flight by number, oldest first (a Set keeps insertion order). */
  private readonly inFlight = new Set<number>();
  private lastNumber = 0;
  /** When a short request was last answered (the duty cycle's window counts from it). */
  private lastAnsweredAt = Number.NEGATIVE_INFINITY;
  /** Ordered by `through`, since numbers only grow. */
  private waiters: Waiter[] = [];
  private readonly now: () => number;

  constructor(limits: LongReadYieldLimits, observer?: LongReadYieldObserver, now: () => number = () => performance.now()) {
    if (!(limits.maxWaitMs >= 0 && limits.maxShare >= 0 && limits.maxShare < 1)) {
      throw new RangeError('long-read yield needs maxWaitMs >= 0 and 0 <= maxShare < 1');
    }
    this.limits = limits;
    this.observer = observer;
    this.now = now;
  }

  /** Reports to `observer` from now on (metrics that read shortRequestsInFlight() need this instance first). */
  observe(observer: LongReadYieldObserver): void {
    this.observer = observer;
  }

  /** A short request began; call the function returned when it has been answered (later calls do nothing). */
  shortRequest(): () => void {
    this.lastNumber += 1;
    const number = this.lastNumber;
    this.inFlight.add(number);
    return () => {
      if (!this.inFlight.delete(number)) return;
      this.lastAnsweredAt = this.now();
      this.wakeWaiters();
    };
  }

  /** Short requests in flight. */
  shortRequestsInFlight(): number {
    return this.inFlight.size;
  }

  /** Whether a short request is in flight, or one was answered within the last `ms` (longReadDutyCycle.ts). */
  shortRequestSeenWithin(ms: number): boolean {
    return this.inFlight.size > 0 || this.now() - this.lastAnsweredAt <= ms;
  }

  /** The turns of one long read, from now. */
  longRead(): LongReadTurns {
    const started = this.now();
    let waitedMs = 0;
    return {
      turn: () => {
        if (this.inFlight.size === 0 || this.limits.maxWaitMs === 0) return undefined;
        const earnedMs = (this.now() - started) * this.limits.maxShare - waitedMs;
        if (earnedMs <= 0) {
          this.observer?.declined();
          return undefined;
        }
        const began = this.now();
        this.observer?.yielding(1);
        return this.waitFor(this.lastNumber, Math.min(earnedMs, this.limits.maxWaitMs)).then(() => {
          const waited = this.now() - began;
          waitedMs += waited;
          this.observer?.yielding(-1);
          this.observer?.yielded(waited / 1000);
        });
      },
      waitedMs: () => waitedMs,
    };
  }

  private waitFor(through: number, atMostMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(), atMostMs);
      const done = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((waiter) => waiter !== entry);
        resolve();
      };
      const entry: Waiter = { through, resolve: done };
      this.waiters.push(entry);
    });
  }

  private wakeWaiters(): void {
    if (this.waiters.length === 0) return;
    const oldest = this.inFlight.values().next();
    const oldestInFlight = oldest.done ? Number.POSITIVE_INFINITY : oldest.value;
    const due = this.waiters.filter((waiter) => waiter.through < oldestInFlight);
    for (const waiter of due) waiter.resolve();
  }
}
