import { expect } from 'chai';
import { PollLoop, type NextPass } from '../../src/platform/pollLoop.ts';
import { ManualClock } from '../support/manual-clock.ts';

async function settle(): Promise<void> {
  for (let round = 0; round < 3; round += 1) await new Promise((resolve) => setImmediate(resolve));
}

/** A loop whose passes are counted and answer what the test says; errors are collected. */
function counting(clock: ManualClock, answer: (pass: number) => NextPass | Error = () => 1_000) {
  const errors: Error[] = [];
  let passes = 0;
  const loop = new PollLoop({
    clock,
    pass: async () => {
      passes += 1;
      const next = answer(passes);
      if (next instanceof Error) throw next;
      return next;
    },
    onError: (error) => {
      errors.push(error);
      return 5_000;
    },
  });
  return { loop, errors, passes: () => passes };
}

describe('PollLoop', () => {
  it('pauses between passes for as long as each pass asks, and not at all for 0', async () => {
    const clock = new ManualClock();
    const { loop, passes } = counting(clock, (pass) => (pass === 2 ? 0 : 1_000));
    loop.start();
    await settle();
    expect(passes()).to.equal(1);
    await clock.advance(999);
    expect(passes()).to.equal(1);
    await clock.advance(1);
    // Pass 2 asked for no pause: pass 3 followed at once.
    expect(passes()).to.equal(3);
    await loop.stop();
  });

  it('wake() ends a pause at once', async () => {
    const clock = new ManualClock();
    const { loop, passes } = counting(clock, () => 60_000);
    loop.start();
    await settle();
    loop.wake();
    await settle();
    expect(passes()).to.equal(2);
    await loop.stop();
  });

  it('a wake during a pass skips the pause after it, so the notification is not lost', async () => {
    const clock = new ManualClock();
    let loop!: PollLoop;
    let passes = 0;
    loop = new PollLoop({
      clock,
      pass: async () => {
        passes += 1;
        if (passes === 1) loop.wake();
        expect(loop.woken).to.equal(passes === 1);
        return 60_000;
      },
      onError: () => 'stop',
    });
    loop.start();
    await settle();
    expect(passes).to.equal(2);
    await loop.stop();
  });

  it('stop() interrupts a pause and a sleep() under way, and resolves after the pass in progress', async () => {
    const clock = new ManualClock();
    let release!: () => void;
    let inPass = false;
    let slept = false;
    let loop!: PollLoop;
    loop = new PollLoop({
      clock,
      pass: async () => {
        inPass = true;
        void loop.sleep(60_000).then(() => (slept = true));
        await new Promise<void>((resolve) => (release = resolve));
        inPass = false;
        return 60_000;
      },
      onError: () => 'stop',
    });
    loop.start();
    await settle();
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    await settle();
    expect(slept, 'a sleep inside the pass ends at stop').to.equal(true);
    expect(stopped, 'stop waits for the pass in progress').to.equal(false);
    release();
    await stopping;
    expect(inPass).to.equal(false);
    expect(loop.stopped).to.equal(true);
  });

  it('hands an error to onError and pauses for the backoff it returns, even if woken during the failed pass', async () => {
    const clock = new ManualClock();
    const errors: Error[] = [];
    let passes = 0;
    let loop!: PollLoop;
    loop = new PollLoop({
      clock,
      pass: async () => {
        passes += 1;
        if (passes > 1) return 1_000;
        loop.wake();
        throw new Error('database gone');
      },
      onError: (error) => {
        errors.push(error);
        return 5_000;
      },
    });
    loop.start();
    await settle();
    expect(errors.map((error) => error.message)).to.deep.equal(['database gone']);
    await clock.advance(4_999);
    expect(passes).to.equal(1);
    await clock.advance(1);
    expect(passes).to.equal(2);
    await loop.stop();
  });

  it('keeps a backoff a pass returns even if woken during it', async () => {
    const clock = new ManualClock();
    let passes = 0;
    let loop!: PollLoop;
    loop = new PollLoop({
      clock,
      pass: async () => {
        passes += 1;
        loop.wake();
        return { backoffMs: 1_000 };
      },
      onError: () => 'stop',
    });
    loop.start();
    await settle();
    expect(passes).to.equal(1);
    await clock.advance(1_000);
    expect(passes).to.equal(2);
    await loop.stop();
  });

  it("ends when a pass or onError says 'stop'", async () => {
    const clock = new ManualClock();
    const { loop, passes } = counting(clock, () => 'stop');
    loop.start();
    await settle();
    expect(loop.stopped).to.equal(true);
    await clock.advance(10_000);
    expect(passes()).to.equal(1);
  });
});
