import { expect } from 'chai';
import {
  RELAY_BATCH_SIZE,
  RELAY_FAILURE_BACKOFF_MS,
  STARTING_SCHEDULE,
  afterLook,
  dueTaken,
  forgetFloor,
  mustLook,
  notificationsMissed,
  notified,
  passFloor,
  queuedSweepFailed,
  released,
  restTime,
  sweepDue,
  sweepStarted,
  unconfirmedSwept,
  type RelaySchedule,
} from '../../src/delivery/relaySchedule.ts';
import { OLD_DUE_TIMES_PAYLOAD, QUEUED_PAYLOAD, REPLAYS_PAYLOAD } from '../../src/delivery/relayWakeUp.ts';

const SETTINGS = { pollMs: 30_000, ackWaitMs: 30_000 };
const T = 1_000_000;
/** A relay at T that has run every sweep and looked, idle: nothing due before its next poll. */
const idle: RelaySchedule = {
  ...STARTING_SCHEDULE,
  lookAt: T + SETTINGS.pollMs,
  nextSweepAt: { unconfirmed: T + 6_000, parked: T + 30_000, queued: T + 30_000 },
  queuedWaiting: false,
};
const snapshot = new Date(Date.UTC(2026, 11, 5, 6, 0, 0));
/** A relay whose last full pass (at T) emptied the outbox: quick passes start just below its snapshot. */
const withFloor: RelaySchedule = dueTaken(idle, { floor: undefined, floorsForgotten: 0, taken: 3, snapshotAt: snapshot }, T);
const look = { published: 0, failed: false, nextDueInMs: undefined, woken: false };
const lookSettings = { pollMs: SETTINGS.pollMs, untilLostSweepMs: 60_000 };

describe('the outbox relay’s schedule (relaySchedule.ts)', () => {
  describe('looking at the outbox', () => {
    it('looks at once when it starts, and not again before its next look is due', () => {
      expect(mustLook(STARTING_SCHEDULE, 0)).to.equal(true);
      expect(mustLook(idle, T + 1)).to.equal(false);
      expect(mustLook(idle, T + SETTINGS.pollMs)).to.equal(true);
    });

    it('looks at once after a notification of new deliveries, and wakes the loop rather than the replays', () => {
      const heard = notified(idle, '');
      expect(heard.replays).to.equal(false);
      expect(mustLook(heard.schedule, T + 1)).to.equal(true);
      expect(heard.schedule.wokenSinceFullPass).to.equal(true);
    });

    it('hands a replay’s creation to the replay runner', () => {
      expect(notified(idle, REPLAYS_PAYLOAD).replays).to.equal(true);
    });
  });

  describe('the floor of quick passes', () => {
    it('sets a floor a second below the snapshot of a full pass that emptied the outbox', () => {
      expect(withFloor.floor).to.deep.equal(new Date(snapshot.getTime() - 1_000));
      expect(passFloor(withFloor, T + 999).floor).to.deep.equal(withFloor.floor);
    });

    it('sets no floor after a full batch: more may be due below it', () => {
      const full = dueTaken(idle, { floor: undefined, floorsForgotten: 0, taken: RELAY_BATCH_SIZE, snapshotAt: snapshot }, T);
      expect(full.floor).to.equal(undefined);
    });

    it('sets no floor from a pass during which a release was heard (it may have committed after the snapshot)', () => {
      const start = passFloor(idle, T);
      const heardMeanwhile = notified(start.schedule, OLD_DUE_TIMES_PAYLOAD).schedule;
      expect(dueTaken(heardMeanwhile, { ...start, taken: 0, snapshotAt: snapshot }, T).floor).to.equal(undefined);
    });

    it('keeps the floor a quick pass started from', () => {
      const start = passFloor(withFloor, T + 10);
      expect(dueTaken(start.schedule, { ...start, taken: 0, snapshotAt: new Date(snapshot.getTime() + 10) }, T + 10).floor).to.deep.equal(
        withFloor.floor,
      );
    });

    it('makes a pass full a second after the last full one, and clears the notifications it covers', () => {
      const woken = notified(withFloor, '').schedule;
      const start = passFloor(woken, T + 1_000);
      expect(start.floor).to.equal(undefined);
      expect(start.schedule.wokenSinceFullPass).to.equal(false);
    });

    it('forgets the floor when deliveries were made due with old due times: released ones, missed notifications', () => {
      expect(notified(withFloor, OLD_DUE_TIMES_PAYLOAD).schedule.floor).to.equal(undefined);
      expect(notificationsMissed(withFloor).floor).to.equal(undefined);
      expect(released(withFloor, 2).floor).to.equal(undefined);
      expect(mustLook(released(withFloor, 2), T + 1)).to.equal(true);
    });

    it('keeps the floor when a sweep released nothing', () => {
      expect(released(withFloor, 0)).to.equal(withFloor);
    });
  });

  describe('sweeps', () => {
    it('runs every sweep when it starts', () => {
      for (const sweep of ['unconfirmed', 'parked', 'queued'] as const) expect(sweepDue(STARTING_SCHEDULE, sweep, 0), sweep).to.equal(true);
    });

    it('runs the unconfirmed sweep every 2 s while publications are in flight, every 6 s while none is', () => {
      const started = sweepStarted(idle, 'unconfirmed', T, SETTINGS);
      expect(unconfirmedSwept(started, { released: 0, inFlight: 4 }, T).nextSweepAt.unconfirmed).to.equal(T + 2_000);
      expect(unconfirmedSwept(started, { released: 0, inFlight: 0 }, T).nextSweepAt.unconfirmed).to.equal(T + 6_000);
    });

    it('makes the next pass a full look after the unconfirmed sweep released some', () => {
      const swept = unconfirmedSwept(sweepStarted(withFloor, 'unconfirmed', T, SETTINGS), { released: 1, inFlight: 0 }, T);
      expect(swept.floor).to.equal(undefined);
      expect(swept.nextSweepAt.unconfirmed).to.equal(T + 2_000);
    });

    it('runs the parked and queued sweeps every ack wait, never more often than every second', () => {
      expect(sweepStarted(idle, 'parked', T, SETTINGS).nextSweepAt.parked).to.equal(T + 30_000);
      expect(sweepStarted(idle, 'parked', T, { ...SETTINGS, ackWaitMs: 200 }).nextSweepAt.parked).to.equal(T + 1_000);
      expect(sweepStarted(idle, 'queued', T, { ...SETTINGS, ackWaitMs: 200 }).nextSweepAt.queued).to.equal(T + 1_000);
      expect(sweepDue(idle, 'parked', T + 29_999)).to.equal(false);
      expect(sweepDue(idle, 'parked', T + 30_000)).to.equal(true);
    });

    it('starts queued deliveries at once when a notification says some were queued, or notifications were missed', () => {
      expect(sweepDue(idle, 'queued', T + 1)).to.equal(false);
      expect(sweepDue(notified(idle, QUEUED_PAYLOAD).schedule, 'queued', T + 1)).to.equal(true);
      expect(sweepDue(notificationsMissed(idle), 'queued', T + 1)).to.equal(true);
    });

    it('starts queued deliveries once per notification, and again on the next pass if starting them failed', () => {
      const started = sweepStarted(notified(idle, QUEUED_PAYLOAD).schedule, 'queued', T + 1, SETTINGS);
      expect(sweepDue(started, 'queued', T + 2)).to.equal(false);
      expect(sweepDue(queuedSweepFailed(started), 'queued', T + 2)).to.equal(true);
    });
  });

  describe('after a look', () => {
    it('backs off a second after a failed publish, a pause a notification does not cut short', () => {
      expect(afterLook(idle, { ...look, failed: true }, T, lookSettings).next).to.deep.equal({ backoffMs: RELAY_FAILURE_BACKOFF_MS });
    });

    it('forgets the floor once deliveries JetStream did not take are put back with their old due times', () => {
      expect(forgetFloor(withFloor).floor).to.equal(undefined);
      expect(forgetFloor(withFloor).floorsForgotten).to.equal(withFloor.floorsForgotten + 1);
    });

    it('goes on at once after a full batch, or after a notification during the pass', () => {
      expect(afterLook(idle, { ...look, published: RELAY_BATCH_SIZE }, T, lookSettings).next).to.equal(0);
      expect(afterLook(idle, { ...look, published: 3, woken: true }, T, lookSettings).next).to.equal(0);
    });

    it('rests until the next retry falls due, so that a retry a second out goes on time', () => {
      const after = afterLook(idle, { ...look, published: 3, nextDueInMs: 1_000 }, T, lookSettings);
      expect(after.next).to.equal(1_000);
      expect(after.schedule.lookAt).to.equal(T + 1_000);
    });

    it('rests pollMs at most with nothing due, or less if a sweep comes first', () => {
      const quiet = { ...idle, nextSweepAt: { unconfirmed: T + 40_000, parked: T + 40_000, queued: T + 40_000 } };
      expect(afterLook(quiet, look, T, lookSettings).next).to.equal(SETTINGS.pollMs);
      expect(afterLook(idle, look, T, lookSettings).next).to.equal(6_000);
      expect(afterLook(quiet, look, T, { ...lookSettings, untilLostSweepMs: 4_000 }).next).to.equal(4_000);
    });
  });

  describe('resting', () => {
    it('rests until the next look or sweep, whichever comes first', () => {
      expect(restTime(idle, T, 60_000).restMs).to.equal(6_000);
      expect(restTime(idle, T + 5_000, 60_000).restMs).to.equal(1_000);
    });

    it('rests at least 20 ms, even when something is already due', () => {
      expect(restTime(idle, T + 10_000, 60_000).restMs).to.equal(20);
    });

    it('while notifications come between full passes, rests no longer than the next full pass', () => {
      const woken = { ...withFloor, wokenSinceFullPass: true };
      const rest = restTime(woken, T + 200, 60_000);
      expect(rest.restMs).to.equal(800);
      expect(rest.schedule.lookAt).to.equal(T + 1_000);
    });

    it('with a floor and nothing heard since, waits for its look rather than a full pass', () => {
      expect(restTime(withFloor, T + 200, 60_000).restMs).to.equal(5_800);
    });
  });
});
