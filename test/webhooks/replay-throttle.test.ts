import { expect } from 'chai';
import { nextReplayStep, pendingCap } from '../../src/delivery/replayThrottle.ts';

/** How fast a replay may go (delivery/replayThrottle.ts), without a database or a relay. */
describe('a replay’s throttle', () => {
  const limits = { chunkSize: 500, maxPending: 1000 };

  it('keeps up to maxPending pending alone, and few beside live traffic and for 5 s after it', () => {
    expect(pendingCap(limits, { nowMs: 100_000, seenAtMs: 0, now: false })).to.deep.equal({ cap: 1000, seenAtMs: 0 });
    // Live traffic now: the low cap, and the time remembered.
    expect(pendingCap(limits, { nowMs: 100_000, seenAtMs: 0, now: true })).to.deep.equal({ cap: 100, seenAtMs: 100_000 });
    // Gone quiet a moment ago: still the low cap.
    expect(pendingCap(limits, { nowMs: 104_999, seenAtMs: 100_000, now: false })).to.deep.equal({ cap: 100, seenAtMs: 100_000 });
    // Quiet for 5 s: the full cap again.
    expect(pendingCap(limits, { nowMs: 105_000, seenAtMs: 100_000, now: false }).cap).to.equal(1000);
    // A maxPending below the live cap is kept either way.
    expect(pendingCap({ chunkSize: 500, maxPending: 40 }, { nowMs: 1, seenAtMs: 0, now: true }).cap).to.equal(40);
  });

  it('fills the room under the cap a chunk at a time', () => {
    expect(nextReplayStep(limits, 1000, 0)).to.deep.equal({ kind: 'chunk', size: 500 });
    expect(nextReplayStep(limits, 1000, 700)).to.deep.equal({ kind: 'chunk', size: 300 });
    expect(nextReplayStep(limits, 100, 50)).to.deep.equal({ kind: 'chunk', size: 50 });
  });

  it('waits rather than send a chunk too small to be worth its transaction', () => {
    expect(nextReplayStep(limits, 1000, 951)).to.deep.equal({ kind: 'wait', ms: 20 });
    expect(nextReplayStep(limits, 100, 100)).to.deep.equal({ kind: 'wait', ms: 20 });
    // Past the cap (live traffic lowered it under what was pending): wait too.
    expect(nextReplayStep(limits, 100, 400)).to.deep.equal({ kind: 'wait', ms: 20 });
    // A cap below the smallest chunk: the whole cap is room enough.
    expect(nextReplayStep({ chunkSize: 500, maxPending: 10 }, 10, 0)).to.deep.equal({ kind: 'chunk', size: 10 });
  });
});
