export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  /** A failure this long after the previous one starts from initialMs again: what failed before worked since. */
  readonly resetAfterMs: number;
  /** Each delay is lengthened by up to this fraction, at random, so that many clients do not retry in step. */
  readonly jitter: number;
}

/** client-go's reflector: 800 ms doubling to 30 s, reset after 2 minutes without failure, jitter 1.0. */
export const WATCH_BACKOFF: BackoffPolicy = { initialMs: 800, maxMs: 30_000, resetAfterMs: 120_000, jitter: 1 };

/** Capped exponential backoff for one thing that keeps failing (a watch): each next() doubles the delay. */
export class Backoff {
  private readonly policy: BackoffPolicy;
  private readonly random: () => number;
  private failures = 0;
  private lastFailureAt = Number.NEGATIVE_INFINITY;

  constructor(policy: BackoffPolicy, random: () => number = Math.random) {
    this.policy = policy;
    this.random = random;
  }

  /** The delay before the next attempt, after a failure now. */
  next(now = Date.now()): number {
    if (now - this.lastFailureAt >= this.policy.resetAfterMs) this.failures = 0;
    this.lastFailureAt = now;
    const base = this.policy.initialMs * 2 ** this.failures;
    this.failures += 1;
    return Math.round(Math.min(this.policy.maxMs, base * (1 + this.policy.jitter * this.random())));
  }
}
