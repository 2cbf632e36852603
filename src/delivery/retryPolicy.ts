import { type RandomSource, spread, systemRandom } from '../platform/backoff.ts';

/**
 * When the next attempt of a failed delivery happens (docs/webhooks.md "Success, retries and auto-disable"):
 * attempt 1 at once, then the configured delays (1 m, 5 m, 30 m, 2 h), or the endpoint's own schedule, each
 * varied uniformly by ±20 %. A delivery has one attempt more than its schedule has delays.
 */
const JITTER = 0.2;

export class RetryPolicy {
  private readonly delaysMs: readonly number[];
  private readonly random: RandomSource;

  constructor(delaysMs: readonly number[], random: RandomSource = systemRandom) {
    this.delaysMs = delaysMs;
    this.random = random;
  }

  get maxAttempts(): number {
    return this.delaysMs.length + 1;
  }

  /** A uniform draw in [0, 1) for delayAfter, made once per attempt (deliveryStateMachine.ts says why). */
  draw(): number {
    return this.random();
  }

  /**
   * Delay before the attempt after `attempt`, varied by `jitter` (a draw); undefined when `attempt` was the
   * last. `delaysMs` is the endpoint's schedule when it has one.
   */
  delayAfter(attempt: number, jitter: number, delaysMs: readonly number[] = this.delaysMs): number | undefined {
    const base = delaysMs[attempt - 1];
    if (base === undefined) return undefined;
    return Math.round(spread(base, [1 - JITTER, 1 + JITTER], () => jitter));
  }
}
