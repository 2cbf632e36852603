import type { NextPass } from '../platform/pollLoop.ts';
import { OLD_DUE_TIMES_PAYLOAD, QUEUED_PAYLOAD, REPLAYS_PAYLOAD } from './relayWakeUp.ts';

/**
 * When the outbox relay (deliveryRelay.ts) does what, decided without I/O: the relay hands in the clock's time
 * and what its last step found, and carries out the answer (a sweep, a look at the outbox, a pause). Every
 * rule of its timing is here, and its tests need neither Postgres nor NATS.
 *
 * - The outbox is looked at when a notification says deliveries were made due, when the next known due time
 *   comes, and at least every pollMs; a pass with nothing to look at runs only the sweeps due.
 * - Sweeps: unconfirmed publications every 2 s (every 6 s while none is in flight), one parked delivery per
 *   endpoint and the ordered endpoints' next deliveries every ack wait (at least 1 s; the latter at once when
 *   a notification says some were queued). A sweep's next time is set as it starts, so a failing one waits.
 * - Quick passes start at a floor just below the last full pass's snapshot; deliveries made due with old due
 *   times (released, put back, heard of by notification or missed notifications) make the next pass full,
 *   and a full pass comes at least every second while notifications arrive.
 * - After a full batch or a notification during the pass, the next pass comes at once; after a failed
 *   publish, a backoff of a second that a notification does not cut short.
 */

/** Deliveries taken from the outbox per pass, at most. */
export const RELAY_BATCH_SIZE = 500;
/** The pause after a pass that failed (a thrown pass, or deliveries JetStream did not take). */
export const RELAY_FAILURE_BACKOFF_MS = 1_000;
/** Publications unconfirmed for UNCONFIRMED_AFTER_MS (publicationConfirmations.ts) are looked for this often. */
const UNCONFIRMED_SWEEP_MS = 2_000;
/**
 * With nothing in flight at the last sweep, only a publication made since can be lost, and one made just
 * after it is found at UNCONFIRMED_AFTER_MS plus this: within the documented 20 s (docs/operations.md, "Lost
 * publications"). Ingest publishes without telling the relays, so an idle relay cannot wait for a sign.
 */
const IDLE_UNCONFIRMED_SWEEP_MS = 6_000;
/** The parked and queued sweeps run every ack wait, but never more often than this. */
const MIN_ACK_WAIT_SWEEP_MS = 1_000;
const MIN_IDLE_MS = 20;
/**
 * Quick passes (see passFloor) start this far before the last full pass, which covers deliveries written by
 * transactions that began a little before it (a row's due time is its transaction's start) ...
 */
const FLOOR_MARGIN_MS = 1_000;
/** ... and a full pass at least this often takes whatever the quick ones cannot see. */
const FULL_PASS_INTERVAL_MS = 1_000;

export interface RelaySettings {
  /** The longest the relay goes without looking at the outbox (RELAY_POLL_MS). */
  readonly pollMs: number;
  /** DELIVERY_ACK_WAIT_MS: how often the parked and queued sweeps run. */
  readonly ackWaitMs: number;
}

/** The sweeps a pass may run before it looks at the outbox, in the order it runs them. */
export type RelaySweep = 'unconfirmed' | 'parked' | 'queued';

export interface RelaySchedule {
  /**
   * When the outbox must be looked at next (the clock's time): the next due time, or pollMs after the last
   * look; 0 after a notification.
   */
  readonly lookAt: number;
  readonly nextSweepAt: Readonly<Record<RelaySweep, number>>;
  /** Deliveries of ordered endpoints were queued (or may have been): start the next of each idle one. */
  readonly queuedWaiting: boolean;
  /** Where quick passes start; undefined until a full pass has emptied the outbox of due deliveries. */
  readonly floor: Date | undefined;
  readonly nextFullPassAt: number;
  /**
   * A notification came since the last full pass: rows of a transaction older than the floor's margin may
   * have come with it, which only a full pass sees. Without one, nothing new was written, and an idle relay
   * need not look again before pollMs.
   */
  readonly wokenSinceFullPass: boolean;
  /** Counts the floors forgotten, so that a full pass does not set a floor something made unsafe meanwhile. */
  readonly floorsForgotten: number;
}

/** A relay starting: every sweep and a full look due at once. */
export const STARTING_SCHEDULE: RelaySchedule = {
  lookAt: 0,
  nextSweepAt: { unconfirmed: 0, parked: 0, queued: 0 },
  queuedWaiting: true,
  floor: undefined,
  nextFullPassAt: 0,
  wokenSinceFullPass: false,
  floorsForgotten: 0,
};

/** Deliveries may have been made due below the floor: the next pass looks, and looks in full. */
export function forgetFloor(schedule: RelaySchedule): RelaySchedule {
  return { ...schedule, lookAt: 0, floor: undefined, floorsForgotten: schedule.floorsForgotten + 1 };
}

/**
 * A notification on the relays' channel: deliveries were made due (old due times among them, or queued ones),
 * or a replay was created, which the relay hands on rather than looking at the outbox for it.
 */
export function notified(
  schedule: RelaySchedule,
  payload: string | undefined,
): { readonly schedule: RelaySchedule; readonly replays: boolean } {
  let next: RelaySchedule = { ...schedule, wokenSinceFullPass: true, lookAt: 0 };
  if (payload === OLD_DUE_TIMES_PAYLOAD) next = forgetFloor(next);
  if (payload === QUEUED_PAYLOAD) next = { ...next, queuedWaiting: true };
  return { schedule: next, replays: payload === REPLAYS_PAYLOAD };
}

/** Notifications may have been missed (the LISTEN connection was down): released parked and queued ones among them. */
export function notificationsMissed(schedule: RelaySchedule): RelaySchedule {
  return { ...forgetFloor(schedule), queuedWaiting: true };
}

export function sweepDue(schedule: RelaySchedule, sweep: RelaySweep, now: number): boolean {
  return now >= schedule.nextSweepAt[sweep] || (sweep === 'queued' && schedule.queuedWaiting);
}

/** A sweep starts: its next run is set from now, whatever this one comes to. */
export function sweepStarted(schedule: RelaySchedule, sweep: RelaySweep, now: number, settings: RelaySettings): RelaySchedule {
  const interval = sweep === 'unconfirmed' ? UNCONFIRMED_SWEEP_MS : Math.max(MIN_ACK_WAIT_SWEEP_MS, settings.ackWaitMs);
  const started = { ...schedule, nextSweepAt: { ...schedule.nextSweepAt, [sweep]: now + interval } };
  return sweep === 'queued' ? { ...started, queuedWaiting: false } : started;
}

/** The unconfirmed sweep is done: with nothing in flight and nothing released, the next waits longer. */
export function unconfirmedSwept(
  schedule: RelaySchedule,
  found: { readonly released: number; readonly inFlight: number },
  now: number,
): RelaySchedule {
  if (found.released > 0) return forgetFloor(schedule);
  if (found.inFlight > 0) return schedule;
  return { ...schedule, nextSweepAt: { ...schedule.nextSweepAt, unconfirmed: now + IDLE_UNCONFIRMED_SWEEP_MS } };
}

/** A sweep made deliveries due again with their old due times (lost, unconfirmed or parked ones), or none. */
export function released(schedule: RelaySchedule, count: number): RelaySchedule {
  return count > 0 ? forgetFloor(schedule) : schedule;
}

/** Starting the ordered endpoints' next deliveries failed: the next pass tries again. */
export function queuedSweepFailed(schedule: RelaySchedule): RelaySchedule {
  return { ...schedule, queuedWaiting: true };
}

/** Whether this pass looks at the outbox, or only runs its sweeps. */
export function mustLook(schedule: RelaySchedule, now: number): boolean {
  return now >= schedule.lookAt;
}

/**
 * Where this pass starts in the outbox's due order: nowhere (a full pass) or the floor (a quick pass). A
 * full pass walks every dead index entry earlier passes left behind (deliveryOutbox.ts, takeDueDeliveries);
 * once one found fewer due deliveries than it could take, nothing was left due before its clock, and later
 * passes start just before it (dueTaken). Deliveries made due with an earlier due time are released parked
 * ones (a notification says so), lost publications and failed publishes put back (this relay's own doing),
 * and rows of transactions older than the margin: the first three make the next pass full, and a full pass
 * every FULL_PASS_INTERVAL_MS takes the last. `floorsForgotten` goes back to dueTaken with what was taken.
 */
export function passFloor(
  schedule: RelaySchedule,
  now: number,
): { readonly schedule: RelaySchedule; readonly floor: Date | undefined; readonly floorsForgotten: number } {
  const { floorsForgotten } = schedule;
  if (schedule.floor !== undefined && now < schedule.nextFullPassAt) return { schedule, floor: schedule.floor, floorsForgotten };
  return { schedule: { ...schedule, floor: undefined, wokenSinceFullPass: false }, floor: undefined, floorsForgotten };
}

/**
 * What a look at the outbox took: a full pass that took less than a batch, with no floor forgotten while it
 * ran (a release heard meanwhile may have committed after its snapshot), sets the floor below its snapshot.
 */
export function dueTaken(
  schedule: RelaySchedule,
  pass: { readonly floor: Date | undefined; readonly floorsForgotten: number; readonly taken: number; readonly snapshotAt: Date },
  now: number,
): RelaySchedule {
  if (pass.floor !== undefined || pass.taken >= RELAY_BATCH_SIZE || schedule.floorsForgotten !== pass.floorsForgotten) return schedule;
  return { ...schedule, floor: new Date(pass.snapshotAt.getTime() - FLOOR_MARGIN_MS), nextFullPassAt: now + FULL_PASS_INTERVAL_MS };
}

/**
 * What follows a look at the outbox: a backoff after a failed publish, the next pass at once after a full
 * batch or a notification during the pass, else a rest until the next due time (pollMs at most) or sweep.
 */
export function afterLook(
  schedule: RelaySchedule,
  look: { readonly published: number; readonly failed: boolean; readonly nextDueInMs: number | undefined; readonly woken: boolean },
  now: number,
  settings: Pick<RelaySettings, 'pollMs'> & { readonly untilLostSweepMs: number },
): { readonly schedule: RelaySchedule; readonly next: NextPass } {
  if (look.failed) return { schedule, next: { backoffMs: RELAY_FAILURE_BACKOFF_MS } };
  if (look.published >= RELAY_BATCH_SIZE || look.woken) return { schedule, next: 0 };
  const lookAt = now + Math.min(settings.pollMs, look.nextDueInMs ?? Number.POSITIVE_INFINITY);
  const rest = restTime({ ...schedule, lookAt }, now, settings.untilLostSweepMs);
  return { schedule: rest.schedule, next: rest.restMs };
}

/**
 * How long the relay rests: until the next look, or the next sweep (the lost-publication sweep's, from
 * lostPublications.ts, given in), at least MIN_IDLE_MS. A retry one second out is published on time rather
 * than at the next poll, so its ±20 % jitter is not swamped by the poll interval; with nothing waiting and
 * nothing heard, an idle relay rests until pollMs (BENCHMARKS.md, "An idle deployment"). While quick passes
 * run after a notification, a full one comes at least every FULL_PASS_INTERVAL_MS.
 */
export function restTime(
  schedule: RelaySchedule,
  now: number,
  untilLostSweepMs: number,
): { readonly schedule: RelaySchedule; readonly restMs: number } {
  const lookAt =
    schedule.floor !== undefined && schedule.wokenSinceFullPass ? Math.min(schedule.lookAt, schedule.nextFullPassAt) : schedule.lookAt;
  const { unconfirmed, parked, queued } = schedule.nextSweepAt;
  const next = Math.min(lookAt, unconfirmed, parked, queued, now + untilLostSweepMs);
  return { schedule: { ...schedule, lookAt }, restMs: Math.max(MIN_IDLE_MS, next - now) };
}
