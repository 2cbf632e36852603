import { ENDPOINT_FAILING_AFTER } from '../webhooks/operationalEvents.ts';

/**
 * The delivery state machine (docs/webhooks.md "Success, retries and auto-disable"), with no I/O: given a
 * delivery and its endpoint as the outcome recorder found them under the endpoint's lock, and what a worker
 * reports, applyOutcome says what the delivery becomes, when it is due next, what the endpoint's count of
 * failed deliveries in a row becomes, and whether the endpoint is disabled. The recorder persists what it
 * returns and decides nothing itself (outcomeRecorder.ts).
 *
 * The rules it encodes:
 * - An outcome applies only while the delivery waits for exactly that attempt (pending or parked, with
 *   attempt − 1 attempts made): a late copy of a message (JetStream redelivered it, the relay published the
 *   delivery again, a manual retry moved it on) changes nothing. An attempt actually made is still recorded
 *   in the attempt log while the delivery exists (the first record of an attempt number stands).
 * - A failed attempt with delays left in the schedule leaves the delivery pending, due after the delay
 *   counted from the end of the request; without one the delivery has failed for good.
 * - A delivery that fails for good adds one to its endpoint's count, unless its failure was counted before
 *   (a manual retry of a failed delivery gets one attempt more, which cannot count twice); a success resets
 *   the count; an active endpoint whose count reaches the threshold is disabled.
 * - Deferrals (no attempt made) and parkings (the endpoint's slots were busy) are not attempts: the
 *   delivery waits for the same attempt and the endpoint is untouched. A cancellation (the endpoint was
 *   inactive) finishes the delivery without an attempt.
 * - Requests that finish release parked deliveries of their endpoint: one per answer, two per success.
 * - A delivery of an ordered endpoint that has succeeded or failed for good starts the endpoint's next one.
 * - The retry schedule is the endpoint's own when it has one.
 * - An active endpoint whose count reaches ENDPOINT_FAILING_AFTER is reported failing (once per streak).
 */

/** Failed deliveries in a row at which an endpoint is disabled (docs/webhooks.md). */
export const AUTO_DISABLE_AFTER_FAILED_DELIVERIES = 10;

/** What a delivery row can be in (migration 029's check). */
export type DeliveryState = 'pending' | 'parked' | 'queued' | 'succeeded' | 'failed' | 'cancelled';

/** The delivery as it stands before the outcome; undefined when it was deleted (with its endpoint). */
export interface DeliveryFacts {
  readonly state: DeliveryState;
  /** Attempts made so far. */
  readonly attempts: number;
  /** Its failure has already been counted against the endpoint (a manual retry of a failed delivery). */
  readonly failureCounted: boolean;
}

/** The endpoint as it stands before the outcome; undefined when it was deleted. */
export interface EndpointFacts {
  readonly active: boolean;
  /** Failed deliveries in a row. */
  readonly consecutiveFailures: number;
  /** The last attempt's time, whatever its outcome; null before the first. */
  readonly lastAttemptAt: Date | null;
  /** One delivery at a time, in order. */
  readonly ordered: boolean;
  /** Its retry schedule in seconds; null for the service's. */
  readonly retryScheduleS: readonly number[] | null;
}

/** What happened to the attempt an outcome names. Times are those of the request, not of the record. */
export interface AttemptRecord {
  readonly attemptedAt: Date;
  readonly durationMs: number;
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly responseExcerpt: string;
}

/** What a worker reports of one delivery's message. */
export type DeliveryOutcome =
  /** The request was made: `ok` when the receiver answered 2xx in time. */
  | {
      readonly kind: 'attempted';
      readonly deliveryId: string;
      readonly attempt: number;
      readonly ok: boolean;
      /**
       * A uniform draw in [0, 1) made with the attempt, which varies a retry's delay: drawn once, so that the
       * worker's log and the recorder's due time agree, and applyOutcome stays a function of its inputs.
       */
      readonly jitter: number;
      readonly record: AttemptRecord;
    }
  /** No attempt was made (the worker could not make it, or was stopping); the same attempt is due again at dueAt. */
  | { readonly kind: 'deferred'; readonly deliveryId: string; readonly attempt: number; readonly dueAt: Date }
  /**
   * No attempt was made: every slot of the endpoint was busy. The delivery waits, parked, until requests to
   * its endpoint finish; its due time stays, so it keeps its place among the parked.
   */
  | { readonly kind: 'parked'; readonly deliveryId: string; readonly attempt: number }
  /** The endpoint is inactive: nothing more will be attempted. */
  | { readonly kind: 'cancelled'; readonly deliveryId: string; readonly attempt: number };

export interface DeliveryPolicy {
  /**
   * Delay before the attempt after `attempt`, varied by `jitter`; undefined when `attempt` was the last
   * (RetryPolicy). `delaysMs`: the endpoint's schedule, when it has one.
   */
  delayAfter(attempt: number, jitter: number, delaysMs?: readonly number[]): number | undefined;
  /** Failed deliveries in a row at which an endpoint is disabled. */
  readonly autoDisableAfter: number;
  /** Failed deliveries in a row at which an endpoint is reported failing. */
  readonly failingAfter: number;
}

/** The schedule's delays with the thresholds of the docs. */
export function deliveryPolicy(retry: Pick<DeliveryPolicy, 'delayAfter'>): DeliveryPolicy {
  return {
    delayAfter: (attempt, jitter, delaysMs) => retry.delayAfter(attempt, jitter, delaysMs),
    autoDisableAfter: AUTO_DISABLE_AFTER_FAILED_DELIVERIES,
    failingAfter: ENDPOINT_FAILING_AFTER,
  };
}

/** An endpoint's schedule in the policy's milliseconds; undefined for the service's. */
export function scheduleOf(endpoint: { readonly retryScheduleS: readonly number[] | null } | undefined): readonly number[] | undefined {
  return endpoint?.retryScheduleS?.map((seconds) => seconds * 1000) ?? undefined;
}

/** What an attempt came to, for the worker's metrics and log; whether it applied or came too late. */
export interface AttemptVerdict {
  readonly result: 'succeeded' | 'failed' | 'pending';
  /** The retry's delay when the result is pending. */
  readonly retryInMs: number | undefined;
}

/** The delivery's row after the outcome. */
export interface DeliveryChange {
  readonly state: DeliveryState;
  readonly attempts: number;
  /** The new due time; null keeps the row's. */
  readonly dueAt: Date | null;
  /** Finished (succeeded, failed, cancelled): completed_at is set; otherwise it is cleared. */
  readonly completed: boolean;
  /** A retry was scheduled: the relays are woken to sleep until it falls due. */
  readonly wakeRelays: boolean;
}

export interface Transition {
  /** Set for an attempt, whatever became of the delivery. */
  readonly verdict: AttemptVerdict | undefined;
  /** The attempt's record is written (an attempt was made and the delivery exists). */
  readonly recordAttempt: boolean;
  /** The delivery's new row; undefined when nothing changes. */
  readonly delivery: DeliveryChange | undefined;
  /** The endpoint after the outcome; undefined when it is unchanged (or gone). */
  readonly endpoint: EndpointFacts | undefined;
  /** Parked deliveries of the endpoint to release. */
  readonly releasesParked: number;
  /** The endpoint is active and its count reached the threshold: disable it (and cancel what it has pending). */
  readonly disable: boolean;
  /** The endpoint is active and its count just reached the failing threshold: report it. */
  readonly failing: boolean;
  /** The delivery of an ordered endpoint finished: start the endpoint's next one. */
  readonly startsNext: boolean;
}

const NOTHING: Transition = {
  verdict: undefined,
  recordAttempt: false,
  delivery: undefined,
  endpoint: undefined,
  releasesParked: 0,
  disable: false,
  failing: false,
  startsNext: false,
};

export function applyOutcome(
  delivery: DeliveryFacts | undefined,
  endpoint: EndpointFacts | undefined,
  outcome: DeliveryOutcome,
  policy: DeliveryPolicy,
): Transition {
  const verdict = outcome.kind === 'attempted' ? attemptVerdict(outcome, policy, scheduleOf(endpoint)) : undefined;
  if (!delivery) return { ...NOTHING, verdict };
  const recordAttempt = outcome.kind === 'attempted';
  if (!waitsFor(delivery, outcome.attempt)) return { ...NOTHING, verdict, recordAttempt };
  if (outcome.kind !== 'attempted') return { ...NOTHING, delivery: withoutAttempt(outcome) };
  const { record } = outcome;
  const result = verdict!.result;
  const change: DeliveryChange = {
    state: result,
    attempts: outcome.attempt,
    dueAt: result === 'pending' ? new Date(record.attemptedAt.getTime() + record.durationMs + verdict!.retryInMs!) : null,
    completed: result !== 'pending',
    wakeRelays: result === 'pending',
  };
  const after = endpoint && countAgainst(endpoint, result, delivery.failureCounted, record.attemptedAt);
  return {
    verdict,
    recordAttempt,
    delivery: change,
    endpoint: after,
    releasesParked: result === 'succeeded' ? 2 : 1,
    disable: after?.active === true && after.consecutiveFailures >= policy.autoDisableAfter,
    failing:
      after?.active === true && endpoint!.consecutiveFailures < policy.failingAfter && after.consecutiveFailures >= policy.failingAfter,
    startsNext: after?.ordered === true && result !== 'pending',
  };
}

/** What an attempt comes to, whatever the delivery's state: what the worker counts and logs. */
export function attemptVerdict(
  outcome: Pick<Extract<DeliveryOutcome, { kind: 'attempted' }>, 'attempt' | 'ok' | 'jitter'>,
  policy: Pick<DeliveryPolicy, 'delayAfter'>,
  delaysMs?: readonly number[],
): AttemptVerdict {
  if (outcome.ok) return { result: 'succeeded', retryInMs: undefined };
  const retryInMs = policy.delayAfter(outcome.attempt, outcome.jitter, delaysMs);
  return { result: retryInMs === undefined ? 'failed' : 'pending', retryInMs };
}

/** Still waiting for this attempt: not finished, and no attempt of this number (or later) made. */
function waitsFor(delivery: DeliveryFacts, attempt: number): boolean {
  return (delivery.state === 'pending' || delivery.state === 'parked') && delivery.attempts === attempt - 1;
}

function withoutAttempt(outcome: Exclude<DeliveryOutcome, { kind: 'attempted' }>): DeliveryChange {
  const attempts = outcome.attempt - 1;
  switch (outcome.kind) {
    case 'deferred':
      return { state: 'pending', attempts, dueAt: outcome.dueAt, completed: false, wakeRelays: false };
    case 'parked':
      return { state: 'parked', attempts, dueAt: null, completed: false, wakeRelays: false };
    case 'cancelled':
      return { state: 'cancelled', attempts, dueAt: null, completed: true, wakeRelays: false };
  }
}

function countAgainst(
  endpoint: EndpointFacts,
  result: AttemptVerdict['result'],
  alreadyCounted: boolean,
  attemptedAt: Date,
): EndpointFacts {
  const consecutiveFailures =
    result === 'succeeded' ? 0 : result === 'failed' && !alreadyCounted ? endpoint.consecutiveFailures + 1 : endpoint.consecutiveFailures;
  const lastAttemptAt = endpoint.lastAttemptAt === null || attemptedAt > endpoint.lastAttemptAt ? attemptedAt : endpoint.lastAttemptAt;
  return { ...endpoint, consecutiveFailures, lastAttemptAt };
}
