import { expect } from 'chai';
import type { DeliveryOutcome } from '../../src/delivery/deliveryOutbox.ts';
import { AUTO_DISABLE_AFTER_FAILED_DELIVERIES, shouldAutoDisable, tallyEndpointOutcomes } from '../../src/delivery/endpointFailures.ts';

const at = (second: number) => new Date(Date.UTC(2026, 10, 23, 10, 0, second));
const attempted = (deliveryId: string, state: 'succeeded' | 'failed' | 'pending', second: number): DeliveryOutcome => ({
  kind: 'attempted',
  deliveryId,
  attempt: 1,
  state,
  dueAt: null,
  record: { attemptedAt: at(second), durationMs: 5, statusCode: state === 'succeeded' ? 204 : 503, error: null, responseExcerpt: '' },
});

describe('endpoint failure counting and auto-disable', () => {
  it('disables an active endpoint at exactly 10 failed deliveries in a row, not at 9', () => {
    expect(AUTO_DISABLE_AFTER_FAILED_DELIVERIES).to.equal(10);
    expect(shouldAutoDisable({ id: 'wh_a', active: true, consecutiveFailures: 9 })).to.equal(false);
    expect(shouldAutoDisable({ id: 'wh_a', active: true, consecutiveFailures: 10 })).to.equal(true);
    expect(shouldAutoDisable({ id: 'wh_a', active: true, consecutiveFailures: 11 })).to.equal(true);
  });

  it('never disables an endpoint that is already inactive (no second auto_disable event)', () => {
    expect(shouldAutoDisable({ id: 'wh_a', active: false, consecutiveFailures: 12 })).to.equal(false);
  });

  it('counts only deliveries that went terminal; a retry still pending is not a failed delivery', () => {
    const [tally] = tallyEndpointOutcomes([
      { endpointId: 'wh_a', outcome: attempted('1', 'pending', 1) },
      { endpointId: 'wh_a', outcome: attempted('2', 'failed', 2) },
      { endpointId: 'wh_a', outcome: attempted('3', 'pending', 3) },
    ]);
    expect(tally).to.deep.equal({ endpointId: 'wh_a', reset: false, failuresAfterLastSuccess: 1, lastAttemptAt: at(3) });
  });

  it('restarts the count at a success and counts the failures after it, per endpoint in id order', () => {
    const tallies = tallyEndpointOutcomes([
      { endpointId: 'wh_b', outcome: attempted('1', 'failed', 1) },
      { endpointId: 'wh_b', outcome: attempted('2', 'succeeded', 2) },
      { endpointId: 'wh_b', outcome: attempted('3', 'failed', 3) },
      { endpointId: 'wh_a', outcome: attempted('4', 'failed', 4) },
      { endpointId: 'wh_a', outcome: { kind: 'deferred', deliveryId: '5', attempt: 1, dueAt: at(9) } },
    ]);
    expect(tallies).to.deep.equal([
      { endpointId: 'wh_a', reset: false, failuresAfterLastSuccess: 1, lastAttemptAt: at(4) },
      { endpointId: 'wh_b', reset: true, failuresAfterLastSuccess: 1, lastAttemptAt: at(3) },
    ]);
  });

  it('leaves out endpoints with no attempt in the batch (deferrals, parkings and cancellations are not attempts)', () => {
    expect(
      tallyEndpointOutcomes([
        { endpointId: 'wh_c', outcome: { kind: 'deferred', deliveryId: '1', attempt: 2, dueAt: at(1) } },
        { endpointId: 'wh_c', outcome: { kind: 'parked', deliveryId: '3', attempt: 1 } },
        { endpointId: 'wh_c', outcome: { kind: 'cancelled', deliveryId: '2', attempt: 1 } },
      ]),
    ).to.deep.equal([]);
  });
});
