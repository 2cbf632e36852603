import { expect } from 'chai';
import { LongReadDutyCycle, MAX_PAUSE_MS } from '../../src/platform/longReadDutyCycle.ts';
import { LongReadYield } from '../../src/platform/longReadYield.ts';
import { ManualClock } from '../support/manual-clock.ts';

/** Whether a pause has ended, readable at any moment. */
function watch(pause: Promise<void> | undefined): { ended(): boolean } {
  let ended = pause === undefined;
  void pause?.then(() => {
    ended = true;
  });
  return { ended: () => ended };
}

describe('LongReadDutyCycle', () => {
  let clock: ManualClock;
  let shortRequests: LongReadYield;
  let pausedSeconds: number[];
  const dutyCycle = (share = 0.5, windowMs = 1_000) =>
    new LongReadDutyCycle({ dutyCycle: share, windowMs }, shortRequests, clock, { paused: (seconds) => pausedSeconds.push(seconds) });

  beforeEach(() => {
    clock = new ManualClock();
    // The accounting of short requests is the yield module's, on the same clock.
    shortRequests = new LongReadYield({ maxWaitMs: 100, maxShare: 0.5 }, undefined, () => clock.now());
    pausedSeconds = [];
  });

  it('lets a long read run at full speed when no short request has been seen', async () => {
    const pace = dutyCycle().longRead();
    for (let trip = 0; trip < 10; trip += 1) {
      await clock.advance(20);
      expect(pace.roundTrip()).to.equal(undefined);
    }
    expect(pausedSeconds).to.deep.equal([]);
  });

  it('pauses as long as the round trip worked at a duty cycle of 0.5 while a short request is in flight', async () => {
    const pace = dutyCycle(0.5).longRead();
    shortRequests.shortRequest();
    await clock.advance(10);
    const pause = watch(pace.roundTrip());
    await clock.advance(9);
    expect(pause.ended(), 'ended before 10 ms').to.equal(false);
    await clock.advance(1);
    expect(pause.ended()).to.equal(true);
    expect(pausedSeconds).to.deep.equal([0.01]);
  });

  it('pauses three times the work at a duty cycle of 0.25', async () => {
    const pace = dutyCycle(0.25).longRead();
    shortRequests.shortRequest();
    await clock.advance(8);
    const pause = watch(pace.roundTrip());
    await clock.advance(23);
    expect(pause.ended(), 'ended before 24 ms').to.equal(false);
    await clock.advance(1);
    expect(pause.ended()).to.equal(true);
  });

  it('keeps a long read to its share of wall time over many round trips beside short traffic', async () => {
    const pace = dutyCycle(0.4).longRead();
    shortRequests.shortRequest();
    const began = clock.now();
    let workedMs = 0;
    for (let trip = 0; trip < 50; trip += 1) {
      const tripMs = 1 + (trip % 7);
      await clock.advance(tripMs);
      workedMs += tripMs;
      const pause = pace.roundTrip();
      expect(pause, `round trip ${trip} did not pause`).to.not.equal(undefined);
      const pauseEnded = watch(pause);
      await clock.advanceUntil(() => pauseEnded.ended(), 'the pause', 1_000);
    }
    expect(workedMs / (clock.now() - began)).to.be.at.most(0.4 + 1e-9);
  });

  it('still pauses within the window after the last short request ended, and not after it', async () => {
    const pace = dutyCycle(0.5, 1_000).longRead();
    const end = shortRequests.shortRequest();
    end();
    await clock.advance(1_000);
    const within = pace.roundTrip();
    expect(within, 'no pause 1,000 ms after the last short request').to.not.equal(undefined);
    await clock.advance(MAX_PAUSE_MS);
    await clock.advance(1);
    expect(pace.roundTrip(), 'a pause past the window').to.equal(undefined);
  });

  it('does not count time spent yielding to short requests as work', async () => {
    let yieldedMs = 0;
    const pace = dutyCycle(0.5).longRead(() => yieldedMs);
    shortRequests.shortRequest();
    await clock.advance(30);
    yieldedMs += 25; // of those 30 ms, 25 were spent waiting for short requests
    const pause = watch(pace.roundTrip());
    await clock.advance(4);
    expect(pause.ended(), 'ended before 5 ms').to.equal(false);
    await clock.advance(1);
    expect(pause.ended(), 'still paused after 5 ms: the wait was counted as work').to.equal(true);
  });

  it('pauses at most MAX_PAUSE_MS after a long round trip', async () => {
    const pace = dutyCycle(0.1).longRead();
    shortRequests.shortRequest();
    await clock.advance(1_000);
    const pause = watch(pace.roundTrip());
    await clock.advance(MAX_PAUSE_MS);
    expect(pause.ended()).to.equal(true);
    expect(pausedSeconds).to.deep.equal([MAX_PAUSE_MS / 1000]);
  });

  it('never pauses at a duty cycle of 1', async () => {
    const pace = dutyCycle(1).longRead();
    shortRequests.shortRequest();
    await clock.advance(50);
    expect(pace.roundTrip()).to.equal(undefined);
  });

  it('counts work from the end of its last pause, not from the start of the read', async () => {
    const pace = dutyCycle(0.5).longRead();
    shortRequests.shortRequest();
    await clock.advance(10);
    const first = watch(pace.roundTrip());
    await clock.advance(10);
    expect(first.ended()).to.equal(true);
    await clock.advance(2);
    const second = watch(pace.roundTrip());
    await clock.advance(1);
    expect(second.ended(), 'ended before 2 ms').to.equal(false);
    await clock.advance(1);
    expect(second.ended()).to.equal(true);
    expect(pausedSeconds).to.deep.equal([0.01, 0.002]);
  });

  it('refuses a duty cycle outside (0, 1]', () => {
    expect(() => dutyCycle(0)).to.throw(RangeError);
    expect(() => dutyCycle(1.5)).to.throw(RangeError);
  });
});
