import { expect } from 'chai';
import { RetryPolicy } from '../../src/delivery/retryPolicy.ts';

/** docs/webhooks.md "Success, retries and auto-disable": attempt 1 at once, then 1 m, 5 m, 30 m, 2 h, each ±20 %. */
describe('when a failed delivery is attempted again (RetryPolicy)', () => {
  const policy = new RetryPolicy([60_000, 300_000, 1_800_000, 7_200_000], () => 0.5);

  it('has one attempt more than its schedule has delays', () => {
    expect(policy.maxAttempts).to.equal(5);
    expect(new RetryPolicy([]).maxAttempts).to.equal(1);
  });

  it('waits the schedule’s delay after each attempt, none after the last', () => {
    expect([1, 2, 3, 4, 5].map((attempt) => policy.delayAfter(attempt, 0.5))).to.deep.equal([
      60_000,
      300_000,
      1_800_000,
      7_200_000,
      undefined,
    ]);
  });

  it('varies each delay uniformly within ±20 %, by the draw it is given', () => {
    expect(policy.delayAfter(1, 0)).to.equal(48_000);
    expect(policy.delayAfter(1, 0.999_999)).to.equal(72_000);
    expect(policy.delayAfter(2, 0.25)).to.equal(270_000);
  });

  it('follows an endpoint’s own schedule when it has one', () => {
    expect(policy.delayAfter(1, 0.5, [10_000])).to.equal(10_000);
    expect(policy.delayAfter(2, 0.5, [10_000])).to.equal(undefined);
  });

  it('draws from the random source it was given', () => {
    expect(policy.draw()).to.equal(0.5);
  });
});
