/**
 * The one capped exponential backoff of the service. Each place that retries says its policy (first delay,
 * cap, spread) rather than writing the doubling again, and takes its randomness as an argument so that its
 * tests can name the delay they expect.
 */

/** A number in [0, 1), as Math.random(). */
export type RandomSource = () => number;

export const systemRandom: RandomSource = Math.random;

export interface BackoffPolicy {
  /** The delay before the first retry. */
  readonly initialMs: number;
  /** No delay is longer than this (before the spread). */
  readonly maxMs: number;
  /**
   * Each delay is multiplied by a factor drawn evenly from [low, high], so that many clients that failed
   * together do not retry in step: [0.8, 1.2] is ±20 %, [0, 1] "full jitter", [1, 1] none.
   */
  readonly spread: readonly [low: number, high: number];
}

/** The delay before retry number `attempt` (1 for the first): initialMs doubling per attempt, capped, spread. */
export function backoffDelay(policy: BackoffPolicy, attempt: number, random: RandomSource = systemRandom): number {
  const exponent = Math.max(0, attempt - 1);
  // Beyond about 2^30 the cap has long applied; the bound keeps 2 ** exponent finite for any attempt.
  const base = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(exponent, 30));
  return Math.round(spread(base, policy.spread, random));
}

/** `ms` multiplied by a factor drawn evenly from [low, high]. */
export function spread(ms: number, [low, high]: readonly [number, number], random: RandomSource = systemRandom): number {
  return ms * (low + (high - low) * random());
}
