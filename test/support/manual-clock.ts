import type { Clock } from '../../src/platform/clock.ts';

interface Timer {
  readonly at: number;
  readonly sequence: number;
  readonly fn: () => void;
}

/**
 * A Clock that moves only when the test says so. Timers fire in time order as time passes over them, and
 * the asynchronous work each one starts (promises over in-memory stores) settles before the next fires, so
 * a test reads as a timeline instead of racing real time on a busy machine.
 */
export class ManualClock implements Clock {
  private current: number;
  private sequence = 0;
  private readonly timers = new Set<Timer>();

  constructor(start = Date.UTC(2030, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimer(fn: () => void, delayMs: number): () => void {
    const timer = { at: this.current + Math.max(0, delayMs), sequence: this.sequence++, fn };
    this.timers.add(timer);
    return () => this.timers.delete(timer);
  }

  /** Moves time forward by ms, firing every timer that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const until = this.current + ms;
    await settle();
    for (;;) {
      const next = [...this.timers].filter((timer) => timer.at <= until).sort((a, b) => a.at - b.at || a.sequence - b.sequence)[0];
      if (!next) break;
      this.timers.delete(next);
      this.current = next.at;
      next.fn();
      await settle();
    }
    this.current = until;
  }

  /** Advances in steps of stepMs until the condition holds; fails after limitMs of clock time. */
  async advanceUntil(condition: () => boolean, what: string, limitMs: number, stepMs = 1): Promise<number> {
    const started = this.current;
    while (!condition()) {
      if (this.current - started >= limitMs) throw new Error(`${what}: not within ${limitMs} ms of clock time`);
      await this.advance(stepMs);
    }
    return this.current - started;
  }
}

/** Lets every promise chain already started run to its end (an in-memory store never waits on I/O). */
async function settle(): Promise<void> {
  for (let round = 0; round < 3; round += 1) await new Promise((resolve) => setImmediate(resolve));
}
