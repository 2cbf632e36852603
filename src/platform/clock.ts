/**
 * Time as code that measures it sees it. Code whose behaviour depends on elapsed time (leases, cache
 * lifetimes) takes a Clock, so that its tests move time by hand instead of sleeping and hoping.
 */
export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number;
  /** Runs fn once after delayMs; returns a function that cancels it. Never keeps the process alive. */
  setTimer(fn: () => void, delayMs: number): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, delayMs) {
    const timer = setTimeout(fn, delayMs);
    timer.unref();
    return () => clearTimeout(timer);
  },
};
