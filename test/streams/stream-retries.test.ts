import { expect } from 'chai';
import { afterDelivered, afterError, afterFailure, afterPass, type RetryState } from '../../src/streams/streamRetries.ts';

/** The decisions of a stream worker after each pass (streams/streamRetries.ts), without a destination or a database. */
describe('a log stream’s retries', () => {
  const fresh: RetryState = { retries: 0, failing: false, limits: { maxItems: 100, maxBytes: 1_000_000 } };
  const settings = { failingRetryMs: 60_000, random: () => 0.5 };
  const transient = { kind: 'retry', reason: 'HEC answered 503' } as const;

  it('retries a transient failure after 1 s, 2 s, 4 s ... up to a minute, and starts over after a pass that worked', () => {
    let state = fresh;
    const waits: number[] = [];
    for (let failure = 0; failure < 9; failure += 1) {
      const next = afterFailure(state, transient, settings);
      expect(next.action.kind).to.equal('retry');
      waits.push(next.action.waitMs);
      state = next.state;
    }
    expect(waits).to.deep.equal([1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    expect(state.failing).to.equal(false);
    const idle = afterPass(state, 'idle', 1000);
    expect(idle).to.deep.equal({ state: { ...state, retries: 0 }, waitMs: 1000 });
    expect(afterPass(state, 'progress', 1000).waitMs).to.equal(0);
    expect(afterFailure(idle.state, transient, settings).action.waitMs).to.equal(1000);
  });

  it('spreads each wait ±20 % with the randomness it is given', () => {
    expect(afterFailure(fresh, transient, { ...settings, random: () => 0 }).action.waitMs).to.equal(800);
    expect(afterFailure(fresh, transient, { ...settings, random: () => 0.999_999 }).action.waitMs).to.equal(1200);
  });

  it('waits out a longer Retry-After, up to five minutes in one piece', () => {
    expect(afterFailure(fresh, { ...transient, retryAfterMs: 30_000 }, settings).action.waitMs).to.equal(30_000);
    expect(afterFailure(fresh, { ...transient, retryAfterMs: 10 }, settings).action.waitMs).to.equal(1000);
    expect(afterFailure(fresh, { ...transient, retryAfterMs: 86_400_000 }, settings).action.waitMs).to.equal(300_000);
  });

  it('halves the batches on a 413 and sends again at once, never below 1 item or 1 KiB', () => {
    const tooLarge = { kind: 'too_large', reason: '413' } as const;
    const first = afterFailure(fresh, tooLarge, settings);
    expect(first.action).to.deep.equal({ kind: 'shrink', reason: '413', waitMs: 0 });
    expect(first.state.limits).to.deep.equal({ maxItems: 50, maxBytes: 500_000 });
    const small = afterFailure({ ...fresh, limits: { maxItems: 3, maxBytes: 1500 } }, tooLarge, settings);
    expect(small.state.limits).to.deep.equal({ maxItems: 1, maxBytes: 1024 });
    expect(small.state.failing).to.equal(false);
  });

  it('takes a single record over the size limit for a refusal: no smaller batch can pass', () => {
    const single = { ...fresh, limits: { maxItems: 1, maxBytes: 1024 } };
    const next = afterFailure(single, { kind: 'too_large', reason: '413 Payload Too Large' }, settings);
    expect(next.action).to.deep.equal({
      kind: 'refused',
      reason: "a single record is over the destination's size limit: 413 Payload Too Large",
      turnedFailing: true,
      waitMs: 60_000,
    });
    expect(next.state).to.deep.include({ failing: true, limits: single.limits });
  });

  it('turns failing on a refusal (the owner told once), probes every failingRetryMs, and recovers on a delivery', () => {
    const refused = { kind: 'refused', reason: 'HEC answered 403' } as const;
    const first = afterFailure(fresh, refused, settings);
    expect(first.action).to.deep.equal({ kind: 'refused', reason: 'HEC answered 403', turnedFailing: true, waitMs: 60_000 });
    const second = afterFailure(first.state, refused, settings);
    expect(second.action).to.include({ turnedFailing: false, waitMs: 60_000 });
    // A transient failure meanwhile leaves it failing.
    expect(afterFailure(second.state, transient, settings).state.failing).to.equal(true);
    const delivered = afterDelivered(second.state);
    expect(delivered).to.deep.equal({ state: { ...second.state, failing: false }, recovered: true });
    expect(afterDelivered(delivered.state).recovered).to.equal(false);
  });

  it('tries a pass that threw (Postgres away) again within 5 s, as a role waits for Postgres at its start', () => {
    let state = fresh;
    const waits: number[] = [];
    for (let pass = 0; pass < 7; pass += 1) {
      const next = afterError(state, () => 0.5);
      waits.push(next.waitMs);
      state = next.state;
    }
    expect(waits).to.deep.equal([250, 500, 1000, 2000, 4000, 5000, 5000]);
    expect(state.retries).to.equal(7);
    // ±20 %: never more than 6 s.
    expect(afterError(state, () => 0.999_999).waitMs).to.equal(6000);
    // A pass that then goes through ends the run.
    expect(afterPass(state, 'progress', 200)).to.deep.equal({ state: { ...state, retries: 0 }, waitMs: 0 });
  });
});
