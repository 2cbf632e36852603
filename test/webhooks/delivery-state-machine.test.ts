import { expect } from 'chai';
import { ENDPOINT_FAILING_AFTER } from '../../src/webhooks/operationalEvents.ts';
import {
  AUTO_DISABLE_AFTER_FAILED_DELIVERIES,
  applyOutcome,
  attemptVerdict,
  deliveryPolicy,
  type DeliveryFacts,
  type DeliveryOutcome,
  type EndpointFacts,
} from '../../src/delivery/deliveryStateMachine.ts';
import { RetryPolicy } from '../../src/delivery/retryPolicy.ts';

// The production schedule's delays (docs/webhooks.md): five attempts, the last one without a retry.
const SCHEDULE = [60_000, 300_000, 1_800_000, 7_200_000];
const policy = deliveryPolicy(new RetryPolicy(SCHEDULE));
const at = (second: number) => new Date(Date.UTC(2026, 10, 23, 10, 0, second));

const pending = (attempts: number, failureCounted = false): DeliveryFacts => ({ state: 'pending', attempts, failureCounted });
const endpoint = (consecutiveFailures: number, active = true, lastAttemptAt: Date | null = null): EndpointFacts => ({
  active,
  consecutiveFailures,
  lastAttemptAt,
  ordered: false,
  retryScheduleS: null,
});
/** An attempt made at `second`, lasting 250 ms; jitter 0.5 is the schedule's delay exactly. */
function attempted(attempt: number, ok: boolean, { second = 0, jitter = 0.5 } = {}): DeliveryOutcome {
  return {
    kind: 'attempted',
    deliveryId: '7',
    attempt,
    ok,
    jitter,
    record: { attemptedAt: at(second), durationMs: 250, statusCode: ok ? 204 : 503, error: null, responseExcerpt: '' },
  };
}

describe('the delivery state machine (applyOutcome)', () => {
  describe('attempts', () => {
    it('a success finishes the delivery, resets the endpoint count, releases two parked deliveries', () => {
      const transition = applyOutcome(pending(2), endpoint(4, true, at(0)), attempted(3, true, { second: 9 }), policy);
      expect(transition).to.deep.equal({
        verdict: { result: 'succeeded', retryInMs: undefined },
        recordAttempt: true,
        delivery: { state: 'succeeded', attempts: 3, dueAt: null, completed: true, wakeRelays: false },
        endpoint: { active: true, consecutiveFailures: 0, lastAttemptAt: at(9), ordered: false, retryScheduleS: null },
        releasesParked: 2,
        disable: false,
        failing: false,
        startsNext: false,
      });
    });

    for (const [attempt, delayMs] of SCHEDULE.map((delay, index) => [index + 1, delay] as const)) {
      it(`a failed attempt ${attempt} of 5 leaves it pending, due ${delayMs / 60_000} min after the request ended; the endpoint count stays`, () => {
        const transition = applyOutcome(pending(attempt - 1), endpoint(3), attempted(attempt, false, { second: 1 }), policy);
        expect(transition.verdict).to.deep.equal({ result: 'pending', retryInMs: delayMs });
        expect(transition.delivery).to.deep.equal({
          state: 'pending',
          attempts: attempt,
          dueAt: new Date(at(1).getTime() + 250 + delayMs),
          completed: false,
          wakeRelays: true,
        });
        expect(transition.endpoint).to.deep.equal({
          active: true,
          consecutiveFailures: 3,
          lastAttemptAt: at(1),
          ordered: false,
          retryScheduleS: null,
        });
        expect(transition.releasesParked).to.equal(1);
        expect(transition.disable).to.equal(false);
      });
    }

    it('varies a retry by the drawn jitter, ±20 % at the extremes', () => {
      expect(attemptVerdict({ attempt: 1, ok: false, jitter: 0 }, policy).retryInMs).to.equal(48_000);
      expect(attemptVerdict({ attempt: 1, ok: false, jitter: 0.999999 }, policy).retryInMs).to.equal(72_000);
      const early = applyOutcome(pending(1), endpoint(0), attempted(2, false, { jitter: 0 }), policy);
      expect(early.delivery!.dueAt).to.deep.equal(new Date(at(0).getTime() + 250 + 240_000));
    });

    it('a failed fifth attempt fails the delivery for good and adds one to the endpoint count', () => {
      const transition = applyOutcome(pending(4), endpoint(3), attempted(5, false), policy);
      expect(transition.verdict).to.deep.equal({ result: 'failed', retryInMs: undefined });
      expect(transition.delivery).to.deep.equal({ state: 'failed', attempts: 5, dueAt: null, completed: true, wakeRelays: false });
      expect(transition.endpoint!.consecutiveFailures).to.equal(4);
      expect(transition.releasesParked).to.equal(1);
    });

    it('the tenth failed delivery in a row disables an active endpoint; the ninth does not', () => {
      expect(AUTO_DISABLE_AFTER_FAILED_DELIVERIES).to.equal(10);
      const ninth = applyOutcome(pending(4), endpoint(8), attempted(5, false), policy);
      expect(ninth.endpoint!.consecutiveFailures).to.equal(9);
      expect(ninth.disable).to.equal(false);
      const tenth = applyOutcome(pending(4), endpoint(9), attempted(5, false), policy);
      expect(tenth.endpoint!.consecutiveFailures).to.equal(10);
      expect(tenth.disable).to.equal(true);
    });

    it('a retry still pending is not a failed delivery, even at the threshold', () => {
      const transition = applyOutcome(pending(0), endpoint(9), attempted(1, false), policy);
      expect(transition.endpoint!.consecutiveFailures).to.equal(9);
      expect(transition.disable).to.equal(false);
    });

    it('keeps the latest attempt time of the endpoint (attempts finish out of order)', () => {
      const transition = applyOutcome(pending(0), endpoint(0, true, at(30)), attempted(1, true, { second: 10 }), policy);
      expect(transition.endpoint!.lastAttemptAt).to.deep.equal(at(30));
    });

    it('a parked delivery whose attempt is made (a copy of its message) moves on like a pending one', () => {
      const parked: DeliveryFacts = { state: 'parked', attempts: 0, failureCounted: false };
      expect(applyOutcome(parked, endpoint(0), attempted(1, true), policy).delivery!.state).to.equal('succeeded');
    });
  });

  describe('disabled or deleted endpoints', () => {
    it('an inactive endpoint is never disabled again (no second auto_disable), though the failure counts', () => {
      const transition = applyOutcome(pending(4), endpoint(12, false), attempted(5, false), policy);
      expect(transition.endpoint).to.deep.include({ active: false, consecutiveFailures: 13 });
      expect(transition.disable).to.equal(false);
    });

    it('an attempt of a delivery cancelled when its endpoint was disabled is recorded, and changes nothing else', () => {
      const cancelled: DeliveryFacts = { state: 'cancelled', attempts: 1, failureCounted: false };
      const transition = applyOutcome(cancelled, endpoint(2, false), attempted(2, false), policy);
      expect(transition).to.deep.equal({
        verdict: { result: 'pending', retryInMs: 300_000 },
        recordAttempt: true,
        delivery: undefined,
        endpoint: undefined,
        releasesParked: 0,
        disable: false,
        failing: false,
        startsNext: false,
      });
    });

    it('a delivery deleted with its endpoint gets no record and changes nothing', () => {
      const transition = applyOutcome(undefined, undefined, attempted(1, true), policy);
      expect(transition).to.deep.equal({
        verdict: { result: 'succeeded', retryInMs: undefined },
        recordAttempt: false,
        delivery: undefined,
        endpoint: undefined,
        releasesParked: 0,
        disable: false,
        failing: false,
        startsNext: false,
      });
    });

    it('the worker found the endpoint inactive: the delivery is cancelled without an attempt', () => {
      const transition = applyOutcome(pending(2), endpoint(0, false), { kind: 'cancelled', deliveryId: '7', attempt: 3 }, policy);
      expect(transition.delivery).to.deep.equal({ state: 'cancelled', attempts: 2, dueAt: null, completed: true, wakeRelays: false });
      expect(transition.recordAttempt).to.equal(false);
      expect(transition.endpoint).to.equal(undefined);
    });
  });

  describe('outcomes that are not attempts', () => {
    it('a deferral keeps the attempt count and sets the due time, waking nobody', () => {
      const transition = applyOutcome(pending(1), endpoint(5), { kind: 'deferred', deliveryId: '7', attempt: 2, dueAt: at(40) }, policy);
      expect(transition).to.deep.equal({
        verdict: undefined,
        recordAttempt: false,
        delivery: { state: 'pending', attempts: 1, dueAt: at(40), completed: false, wakeRelays: false },
        endpoint: undefined,
        releasesParked: 0,
        disable: false,
        failing: false,
        startsNext: false,
      });
    });

    it('a parking keeps the due time (its place among the parked) and releases nothing', () => {
      const transition = applyOutcome(pending(0), endpoint(5), { kind: 'parked', deliveryId: '7', attempt: 1 }, policy);
      expect(transition.delivery).to.deep.equal({ state: 'parked', attempts: 0, dueAt: null, completed: false, wakeRelays: false });
      expect(transition.releasesParked).to.equal(0);
      expect(transition.endpoint).to.equal(undefined);
    });
  });

  describe('late outcomes', () => {
    it('a second copy of an attempt already recorded is recorded (the first record stands) and changes nothing', () => {
      const transition = applyOutcome(pending(1), endpoint(0), attempted(1, false), policy);
      expect(transition.recordAttempt).to.equal(true);
      expect(transition.delivery).to.equal(undefined);
      expect(transition.endpoint).to.equal(undefined);
      expect(transition.releasesParked).to.equal(0);
    });

    it('an outcome for a delivery already finished changes nothing', () => {
      for (const state of ['succeeded', 'failed', 'cancelled'] as const) {
        const transition = applyOutcome({ state, attempts: 0, failureCounted: false }, endpoint(0), attempted(1, true), policy);
        expect(transition.delivery, state).to.equal(undefined);
      }
      const deferral = applyOutcome(
        { state: 'succeeded', attempts: 1, failureCounted: false },
        endpoint(0),
        {
          kind: 'deferred',
          deliveryId: '7',
          attempt: 2,
          dueAt: at(5),
        },
        policy,
      );
      expect(deferral.delivery).to.equal(undefined);
    });

    it('a late outcome of attempt 5 after a manual retry made attempt 6 due changes nothing', () => {
      // The manual retry moved the failed delivery (5 attempts) back to pending, its failure counted.
      const retried = pending(5, true);
      const late = applyOutcome(retried, endpoint(1), attempted(5, true), policy);
      expect(late.delivery).to.equal(undefined);
      expect(late.endpoint).to.equal(undefined);
    });

    it("the manual retry's own attempt fails the delivery again without counting it twice; a success resets the count", () => {
      const failedAgain = applyOutcome(pending(5, true), endpoint(7), attempted(6, false), policy);
      expect(failedAgain.verdict).to.deep.equal({ result: 'failed', retryInMs: undefined });
      expect(failedAgain.delivery!.state).to.equal('failed');
      expect(failedAgain.endpoint!.consecutiveFailures).to.equal(7);
      const succeeded = applyOutcome(pending(5, true), endpoint(7), attempted(6, true), policy);
      expect(succeeded.endpoint!.consecutiveFailures).to.equal(0);
    });

    it('a manual retry of the delivery that disabled its endpoint never disables it twice', () => {
      const transition = applyOutcome(pending(5, true), endpoint(10, false), attempted(6, false), policy);
      expect(transition.disable).to.equal(false);
    });
  });

  describe('replays', () => {
    it("a replayed delivery starts at attempt 1 whatever became of the event's first delivery, and follows the same rules", () => {
      // The replay created a new row; the first delivery of the event (failed for good) is another row.
      const replayed = pending(0);
      const success = applyOutcome(replayed, endpoint(6), attempted(1, true), policy);
      expect(success.delivery!.state).to.equal('succeeded');
      expect(success.endpoint!.consecutiveFailures).to.equal(0);
      const retry = applyOutcome(replayed, endpoint(6), attempted(1, false), policy);
      expect(retry.delivery).to.include({ state: 'pending', attempts: 1 });
      expect(retry.endpoint!.consecutiveFailures).to.equal(6);
    });

    it('a replayed delivery failing for good counts against the endpoint like any other', () => {
      const transition = applyOutcome(pending(4), endpoint(9), attempted(5, false), policy);
      expect(transition.disable).to.equal(true);
    });
  });

  it('a schedule without delays makes the first failure final', () => {
    const once = deliveryPolicy(new RetryPolicy([]));
    expect(applyOutcome(pending(0), endpoint(0), attempted(1, false), once).delivery!.state).to.equal('failed');
  });

  describe("an endpoint's own settings", () => {
    const own = (consecutiveFailures: number, settings: Partial<EndpointFacts>): EndpointFacts => ({
      ...endpoint(consecutiveFailures),
      ...settings,
    });

    it("retries on the endpoint's own schedule, and fails the delivery after its last delay", () => {
      const settings = { retryScheduleS: [10, 30] };
      const first = applyOutcome(pending(0), own(0, settings), attempted(1, false), policy);
      expect(first.verdict).to.deep.equal({ result: 'pending', retryInMs: 10_000 });
      expect(first.delivery!.dueAt).to.deep.equal(new Date(at(0).getTime() + 250 + 10_000));
      expect(applyOutcome(pending(1), own(0, settings), attempted(2, false), policy).verdict!.retryInMs).to.equal(30_000);
      const third = applyOutcome(pending(2), own(0, settings), attempted(3, false), policy);
      expect(third.delivery!.state).to.equal('failed');
      expect(third.endpoint!.consecutiveFailures).to.equal(1);
      expect(applyOutcome(pending(0), own(0, { retryScheduleS: [] }), attempted(1, false), policy).delivery!.state).to.equal('failed');
    });

    it('reports an endpoint failing once, when its count reaches five; not at four, not again at six', () => {
      expect(ENDPOINT_FAILING_AFTER).to.equal(5);
      expect(applyOutcome(pending(4), endpoint(3), attempted(5, false), policy).failing).to.equal(false);
      expect(applyOutcome(pending(4), endpoint(4), attempted(5, false), policy).failing).to.equal(true);
      expect(applyOutcome(pending(4), endpoint(5), attempted(5, false), policy).failing).to.equal(false);
      expect(applyOutcome(pending(4), endpoint(4, false), attempted(5, false), policy).failing).to.equal(false);
      // A failure counted before (a manual retry of a failed delivery) does not cross the threshold again.
      expect(applyOutcome(pending(5, true), endpoint(5), attempted(6, false), policy).failing).to.equal(false);
    });

    it("starts an ordered endpoint's next delivery when one succeeds or fails for good, never while it waits for a retry", () => {
      const ordered = own(0, { ordered: true });
      expect(applyOutcome(pending(0), ordered, attempted(1, true), policy).startsNext).to.equal(true);
      expect(applyOutcome(pending(4), ordered, attempted(5, false), policy).startsNext).to.equal(true);
      expect(applyOutcome(pending(0), ordered, attempted(1, false), policy).startsNext).to.equal(false);
      expect(applyOutcome(pending(0), endpoint(0), attempted(1, true), policy).startsNext).to.equal(false);
      // A late copy of an outcome (the delivery moved on) starts nothing.
      const done: DeliveryFacts = { state: 'succeeded', attempts: 1, failureCounted: false };
      expect(applyOutcome(done, ordered, attempted(1, true), policy).startsNext).to.equal(false);
      // Queued deliveries wait for their turn: a message for one (published before a PATCH made the endpoint ordered) is stale.
      const queued: DeliveryFacts = { state: 'queued', attempts: 0, failureCounted: false };
      expect(applyOutcome(queued, ordered, attempted(1, true), policy)).to.deep.include({ delivery: undefined, startsNext: false });
    });
  });
});
