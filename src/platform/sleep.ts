import { setTimeout as delay } from 'node:timers/promises';
import type { Clock } from './clock.ts';

export interface SleepOptions {
  /**
   * Waits by this clock's timer, so that a test moving its clock by hand ends the wait. Without one, a real
   * timer that keeps the process alive: a start-up that waits for Postgres, or a shutdown's drain, must not
   * let Node exit because nothing else is open yet (or any more).
   */
  readonly clock?: Clock;
  /** Ends the wait at once, rejecting with the signal's reason (as node:timers/promises does). */
  readonly signal?: AbortSignal;
}

/** The one sleep of the service: waits `ms`, by the clock given or by a real timer. */
export function sleep(ms: number, options: SleepOptions = {}): Promise<void> {
  const { clock, signal } = options;
  if (clock === undefined) return delay(ms, undefined, { signal });
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const abort = () => {
      cancel();
      reject(signal!.reason);
    };
    const cancel = clock.setTimer(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', abort, { once: true });
  });
}
