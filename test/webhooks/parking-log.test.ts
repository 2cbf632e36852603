import { expect } from 'chai';
import { PARKING_LOG_INTERVAL_MS, ParkingLog } from '../../src/delivery/parkingLog.ts';
import { ManualClock } from '../support/manual-clock.ts';

describe("a saturated endpoint's parking log", () => {
  it('reports the first parking at once, then at most once an interval with the count since', async () => {
    const clock = new ManualClock();
    const log = new ParkingLog(clock);
    expect(log.parked('wh_a')).to.equal(1);
    expect(log.parked('wh_a')).to.equal(undefined);
    await clock.advance(PARKING_LOG_INTERVAL_MS - 1);
    expect(log.parked('wh_a')).to.equal(undefined);
    await clock.advance(1);
    // The two held back and this one.
    expect(log.parked('wh_a')).to.equal(3);
  });

  it('keeps endpoints apart', () => {
    const log = new ParkingLog(new ManualClock());
    expect(log.parked('wh_a')).to.equal(1);
    expect(log.parked('wh_b')).to.equal(1);
  });

  it('forgets an endpoint quiet for two intervals: its next parking is reported at once, counted afresh', async () => {
    const clock = new ManualClock();
    const log = new ParkingLog(clock);
    log.parked('wh_a');
    log.parked('wh_a');
    await clock.advance(2 * PARKING_LOG_INTERVAL_MS - 1);
    log.forgetQuiet();
    expect(log.parked('wh_a'), 'not yet forgotten: the one held back is counted').to.equal(2);
    await clock.advance(2 * PARKING_LOG_INTERVAL_MS);
    log.forgetQuiet();
    expect(log.parked('wh_a')).to.equal(1);
  });
});
