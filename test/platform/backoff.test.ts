import { expect } from 'chai';
import { backoffDelay, spread } from '../../src/platform/backoff.ts';

describe('the one backoff', () => {
  const policy = { initialMs: 250, maxMs: 5_000, spread: [0.8, 1.2] as const };

  it('doubles from the first delay up to the cap, each attempt in its place', () => {
    const middle = () => 0.5;
    expect([1, 2, 3, 4, 5, 6, 7, 50, 5000].map((attempt) => backoffDelay(policy, attempt, middle))).to.deep.equal([
      250, 500, 1000, 2000, 4000, 5000, 5000, 5000, 5000,
    ]);
  });

  it('spreads each delay over its range, ends included', () => {
    expect(backoffDelay(policy, 1, () => 0)).to.equal(200);
    expect(backoffDelay(policy, 1, () => 0.999_999)).to.equal(300);
    expect(backoffDelay(policy, 10, () => 0)).to.equal(4000);
    expect(backoffDelay({ initialMs: 20, maxMs: 1000, spread: [0, 1] }, 3, () => 0.25)).to.equal(20);
    expect(spread(1000, [0.5, 1.5], () => 0.5)).to.equal(1000);
  });

  it('treats an attempt below 1 as the first', () => {
    expect(backoffDelay(policy, 0, () => 0.5)).to.equal(250);
  });
});
