import { type Clock, systemClock } from './clock.ts';

/** The rest that keeps `workedMs` of work to `share` of the wall time: workedMs × (1/share − 1). */
export function restFor(workedMs: number, share: number): number {
  return workedMs * (1 / share - 1);
}

/**
 * Paces background work that competes with the service's own for the same cores (expiry beside ingest): after
 * each step of work, a pause that keeps the work to `share` of the wall time (a step of t ms is followed by
 * t × (1/share − 1) ms of rest). A share of 1 never pauses.
 */
export class DutyCycle {
  private readonly share: number;
  private readonly clock: Clock;

  constructor(share: number, clock: Clock = systemClock) {
    if (!(share > 0 && share <= 1)) throw new RangeError(`a duty cycle's share is in (0, 1], not ${share}`);
    this.share = share;
    this.clock = clock;
  }

  /** When a step starts, for pauseAfter. */
  start(): number {
    return this.clock.now();
  }

  /** The rest a step begun at `startedMs` calls for, waited out (resolves at once at a share of 1). */
  async pauseAfter(startedMs: number): Promise<void> {
    const restMs = restFor(this.clock.now() - startedMs, this.share);
    if (restMs <= 0) return;
    await new Promise<void>((resolve) => this.clock.setTimer(resolve, restMs));
  }
}
