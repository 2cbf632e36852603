import type { Clock } from './clock.ts';
import { restFor } from './dutyCycle.ts';

/**
 * A CPU duty cycle for long reads while short requests are about (issue 28, item 2). Yielding
 * (longReadYield.ts) pauses an export while short requests are in flight, but what cannot be paused still
 * competes with them for a small pod's cores: the FETCH already sent, the exporting client draining its
 * buffers, the collection of the garbage an export leaves. With yielding alone a list beside exports still
 * took 2.6 times its p99 (BENCHMARKS.md "Export fairness"). So while short requests have been seen lately,
 * a long read, after each round trip of rows, pauses in proportion to the time that round trip took: with a
 * duty cycle d it works at most d of the wall time, and leaves the rest of the cores to whatever short
 * requests come next, not only to those already in flight.
 *
 * It costs nothing when nobody else is waiting: with no short request in flight or seen within `windowMs`,
 * a round trip goes on at once. One pause lasts at most MAX_PAUSE_MS, so a round trip that took long (a slow
 * client's backpressure counts as its time too) cannot stop an export for longer than a yield would.
 *
 * Pure bookkeeping over a Clock, no I/O.
 */

export interface LongReadDutyCycleLimits {
  /** The share of wall time a long read may work while short requests are about, in (0, 1]; 1 never pauses. */
  readonly dutyCycle: number;
  /** Short requests count as about while one is in flight or one was within this many milliseconds. */
  readonly windowMs: number;
}

/** Where short requests are counted (longReadYield.ts). */
export interface ShortRequestsSeen {
  /** Whether a short request is in flight, or one was within the last `ms`. */
  shortRequestSeenWithin(ms: number): boolean;
}

export interface LongReadDutyCycleObserver {
  /** A long read paused this long for its duty cycle. */
  paused(seconds: number): void;
}

/** One long read's pace. */
export interface LongReadPace {
  /** Called after each round trip of rows, before the next: resolves when it may go on (undefined: at once). */
  roundTrip(): Promise<void> | undefined;
}

/** The longest one pause: as long as the longest yield by default (LONG_READ_YIELD). */
export const MAX_PAUSE_MS = 100;

export class LongReadDutyCycle {
  private readonly limits: LongReadDutyCycleLimits;
  private readonly shortRequests: ShortRequestsSeen;
  private readonly clock: Clock;
  private observer: LongReadDutyCycleObserver | undefined;

  constructor(limits: LongReadDutyCycleLimits, shortRequests: ShortRequestsSeen, clock: Clock, observer?: LongReadDutyCycleObserver) {
    if (!(limits.dutyCycle > 0 && limits.dutyCycle <= 1 && limits.windowMs >= 0)) {
      throw new RangeError('a long-read duty cycle needs 0 < dutyCycle <= 1 and windowMs >= 0');
    }
    this.limits = limits;
    this.shortRequests = shortRequests;
    this.clock = clock;
    this.observer = observer;
  }

  /** Reports to `observer` from now on. */
  observe(observer: LongReadDutyCycleObserver): void {
    this.observer = observer;
  }

  /**
   * The pace of one long read, from now. `waitedMs` tells how long it has waited otherwise in all (its
   * yields to short requests): time spent waiting is not work, and is not paid for again with a pause.
   */
  longRead(waitedMs: () => number = () => 0): LongReadPace {
    const { dutyCycle, windowMs } = this.limits;
    let resumedAt = this.clock.now();
    let waitedAtResume = waitedMs();
    const resume = () => {
      resumedAt = this.clock.now();
      waitedAtResume = waitedMs();
    };
    return {
      roundTrip: () => {
        const workedMs = this.clock.now() - resumedAt - (waitedMs() - waitedAtResume);
        resume();
        if (dutyCycle >= 1 || workedMs <= 0 || !this.shortRequests.shortRequestSeenWithin(windowMs)) return undefined;
        const pauseMs = Math.min(restFor(workedMs, dutyCycle), MAX_PAUSE_MS);
        const began = this.clock.now();
        return new Promise((resolve) => {
          this.clock.setTimer(() => {
            resume();
            this.observer?.paused((this.clock.now() - began) / 1000);
            resolve();
          }, pauseMs);
        });
      },
    };
  }
}
