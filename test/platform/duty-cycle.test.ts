import { expect } from 'chai';
import { DutyCycle } from '../../src/platform/dutyCycle.ts';
import { ManualClock } from '../support/manual-clock.ts';

describe('DutyCycle: background work kept to a share of the wall time', () => {
  /** Whether the pause after a step of `workMs` is over once `elapsedMs` have passed. */
  async function pauseOverAfter(share: number, workMs: number, elapsedMs: number): Promise<boolean> {
    const clock = new ManualClock();
    const cycle = new DutyCycle(share, clock);
    const started = cycle.start();
    await clock.advance(workMs);
    let over = false;
    void cycle.pauseAfter(started).then(() => {
      over = true;
    });
    await clock.advance(elapsedMs);
    return over;
  }

  it('rests three times as long as a step worked at a share of 0.25', async () => {
    expect(await pauseOverAfter(0.25, 40, 119)).to.equal(false);
    expect(await pauseOverAfter(0.25, 40, 120)).to.equal(true);
  });

  it('rests as long as a step worked at a share of 0.5', async () => {
    expect(await pauseOverAfter(0.5, 40, 39)).to.equal(false);
    expect(await pauseOverAfter(0.5, 40, 40)).to.equal(true);
  });

  it('never rests at a share of 1', async () => {
    expect(await pauseOverAfter(1, 40, 0)).to.equal(true);
  });

  it('refuses a share outside (0, 1]', () => {
    for (const share of [0, -0.5, 1.5, Number.NaN]) expect(() => new DutyCycle(share), String(share)).to.throw(RangeError);
  });
});
