import { backoffDelay, type BackoffPolicy as Policy, type RandomSource, systemRandom } from '../platform/backoff.ts';

export interface BackoffPolicy extends Policy {
  /** A failure this long after the previous one starts from initialMs again: what failed before worked since. */
  readonly resetAfterMs: number;
}

/** client-go's reflector: 800 ms doubling to 30 s, reset after 2 minutes without failure, up to double at random. */
export const WATCH_BACKOFF: BackoffPolicy = { initialMs: 800, maxMs: 30_000, resetAfterMs: 120_000, spread: [1, 2] };

/** The backoff of one thing that keeps failing (a watch): each next() doubles the delay, until a quiet period. */
export class Backoff {
  private readonly policy: BackoffPolicy;
  private readonly random: RandomSource;
  private failures = 0;
  private lastFailureAt = Number.NEGATIVE_INFINITY;

  constructor(policy: BackoffPolicy, random: RandomSource = systemRandom) {
    this.policy = policy;
    this.random = random;
  }

  /** The delay before the next attempt, after a failure at `now`. */
  next(now: number): number {
    if (now - this.lastFailureAt >= this.policy.resetAfterMs) this.failures = 0;
    this.lastFailureAt = now;
    this.failures += 1;
    return backoffDelay(this.policy, this.failures, this.random);
  }
}
