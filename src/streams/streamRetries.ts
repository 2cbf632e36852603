import { backoffDelay, type BackoffPolicy, type RandomSource, systemRandom } from '../platform/backoff.ts';
import type { SendOutcome } from './destinations/destination.ts';

/**
 * What a stream worker does after each pass, decided without I/O: the worker (streamWorker.ts) hands in
 * its state and what the pass came to, and carries out the answer (records the failure, logs, notifies,
 * waits). Every rule of a stream's retries is here, and its tests need no destination and no database.
 *
 * - progress: the next pass at once; idle: after the poll interval. Either ends a run of failures.
 * - a transient failure (`retry`): the same batch after 1 s, 2 s, 4 s ... up to a minute (±20 %), or
 *   after the destination's Retry-After when that is longer (up to five minutes in one piece);
 * - a pass that threw (Postgres away): the same pass after 250 ms doubling to 5 s (±20 %);
 * - `too_large` (413): the same records again at once, in batches of half the items and bytes; a single
 *   record over the limit can never pass, so it is a refusal;
 * - `refused`: the stream is failing (its owner is told once, when it turns), and is tried again every
 *   failingRetryMs until the destination takes a batch.
 */

/** A batch not accepted is sent again after 1 s, 2 s, 4 s ... up to a minute, each ±20 %. */
const RETRY_BACKOFF: BackoffPolicy = { initialMs: 1_000, maxMs: 60_000, spread: [0.8, 1.2] };
/**
 * A pass that threw (Postgres away: a restart, a failover) is tried again after 250 ms doubling to 5 s,
 * ±20 %, as a role waits for Postgres at its start: a destination's minute would have the stream wait up to
 * a minute after the new primary took writes, where every other role carries on within seconds.
 */
const PASS_ERROR_BACKOFF: BackoffPolicy = { initialMs: 250, maxMs: 5_000, spread: [0.8, 1.2] };
/** A Retry-After longer than this is not waited out in one piece (the stream checks again after it). */
const MAX_RETRY_AFTER_MS = 300_000;
/** Batches are never halved below this many bytes. */
const MIN_BATCH_BYTES = 1024;

interface BatchLimits {
  readonly maxItems: number;
  readonly maxBytes: number;
}

export interface RetryState {
  /** Transient failures and failed passes in a row: the next retry's place in RETRY_BACKOFF or PASS_ERROR_BACKOFF. */
  readonly retries: number;
  /** The destination refused a batch and has taken none since. */
  readonly failing: boolean;
  readonly limits: BatchLimits;
}

export type FailedSend = Exclude<SendOutcome, { kind: 'delivered' }>;

/** What the worker does about a failed batch, and when it tries again. */
export type FailureAction =
  | { readonly kind: 'shrink'; readonly reason: string; readonly waitMs: 0 }
  | { readonly kind: 'refused'; readonly reason: string; readonly turnedFailing: boolean; readonly waitMs: number }
  | { readonly kind: 'retry'; readonly reason: string; readonly waitMs: number };

export interface RetrySettings {
  /** How often a failing stream tries its destination again. */
  readonly failingRetryMs: number;
  readonly random?: RandomSource;
}

export function afterFailure(
  state: RetryState,
  outcome: FailedSend,
  settings: RetrySettings,
): { readonly state: RetryState; readonly action: FailureAction } {
  if (outcome.kind === 'too_large') {
    if (state.limits.maxItems === 1) {
      const reason = `a single record is over the destination's size limit: ${outcome.reason}`;
      return afterFailure(state, { kind: 'refused', reason }, settings);
    }
    // The destination allows less than it documents: the same records again, in smaller batches.
    const limits = {
      maxItems: Math.max(1, Math.floor(state.limits.maxItems / 2)),
      maxBytes: Math.max(MIN_BATCH_BYTES, Math.floor(state.limits.maxBytes / 2)),
    };
    return { state: { ...state, limits }, action: { kind: 'shrink', reason: outcome.reason, waitMs: 0 } };
  }
  if (outcome.kind === 'refused') {
    return {
      state: { ...state, failing: true },
      action: { kind: 'refused', reason: outcome.reason, turnedFailing: !state.failing, waitMs: settings.failingRetryMs },
    };
  }
  const retries = state.retries + 1;
  const backoff = backoffDelay(RETRY_BACKOFF, retries, settings.random ?? systemRandom);
  const asked = outcome.retryAfterMs === undefined ? 0 : Math.min(outcome.retryAfterMs, MAX_RETRY_AFTER_MS);
  return { state: { ...state, retries }, action: { kind: 'retry', reason: outcome.reason, waitMs: Math.max(backoff, asked) } };
}

/** A pass that did not fail (it sent, or found nothing to send): the run of failures is over. */
export function afterPass(
  state: RetryState,
  kind: 'progress' | 'idle',
  pollMs: number,
): { readonly state: RetryState; readonly waitMs: number } {
  return { state: { ...state, retries: 0 }, waitMs: kind === 'progress' ? 0 : pollMs };
}

/** A pass that threw (Postgres away, say): the same pass again after PASS_ERROR_BACKOFF. */
export function afterError(
  state: RetryState,
  random: RandomSource = systemRandom,
): { readonly state: RetryState; readonly waitMs: number } {
  const retries = state.retries + 1;
  return { state: { ...state, retries }, waitMs: backoffDelay(PASS_ERROR_BACKOFF, retries, random) };
}

/** The destination took a batch: a failing stream has recovered (its owner is told when `recovered`). */
export function afterDelivered(state: RetryState): { readonly state: RetryState; readonly recovered: boolean } {
  return { state: { ...state, failing: false }, recovered: state.failing };
}
