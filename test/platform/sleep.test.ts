import { expect } from 'chai';
import { sleep } from '../../src/platform/sleep.ts';
import { ManualClock } from '../support/manual-clock.ts';

describe('the one sleep', () => {
  it('ends when the clock given has moved past the wait, not before', async () => {
    const clock = new ManualClock();
    let woke = false;
    const waiting = sleep(1_000, { clock }).then(() => (woke = true));
    await clock.advance(999);
    expect(woke).to.equal(false);
    await clock.advance(1);
    await waiting;
    expect(woke).to.equal(true);
  });

  it("ends at once with the signal's reason when aborted, without waiting for the clock", async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    const waiting = sleep(60_000, { clock, signal: controller.signal });
    controller.abort(new Error('stopping'));
    const failure = await waiting.then(
      () => undefined,
      (error: Error) => error,
    );
    expect(failure?.message).to.equal('stopping');
    expect(clock.now()).to.equal(new ManualClock().now());
  });

  it('does not start when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stopped before'));
    const failure = await sleep(10, { clock: new ManualClock(), signal: controller.signal }).then(
      () => undefined,
      (error: Error) => error,
    );
    expect(failure?.message).to.equal('stopped before');
  });

  it('waits by a real timer without a clock', async () => {
    const started = performance.now();
    await sleep(20);
    expect(performance.now() - started).to.be.at.least(19);
  });
});
