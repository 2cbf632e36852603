import type { Clock } from '../platform/clock.ts';

/** A saturated endpoint's parking is logged at most this often (per endpoint and worker). */
export const PARKING_LOG_INTERVAL_MS = 60_000;

/**
 * When a worker logs that an endpoint is saturated: at its first parking, then at most once a minute with
 * the number parked since, so that a hung receiver's backlog of thousands is a line a minute, not a line
 * a delivery.
 */
export class ParkingLog {
  private readonly clock: Clock;
  /** Per saturated endpoint: deliveries parked since its parking was last logged, and when that was. */
  private readonly endpoints = new Map<string, { parked: number; loggedAt: number }>();

  constructor(clock: Clock) {
    this.clock = clock;
  }

  /** Counts one parking; returns how many to report when a line is due now, else undefined. */
  parked(endpointId: string): number | undefined {
    const now = this.clock.now();
    const parking = this.endpoints.get(endpointId);
    if (parking && now - parking.loggedAt < PARKING_LOG_INTERVAL_MS) {
      parking.parked += 1;
      return undefined;
    }
    this.endpoints.set(endpointId, { parked: 0, loggedAt: now });
    return (parking?.parked ?? 0) + 1;
  }

  /** Endpoints whose parking was last logged long ago start afresh: the next parking is logged at once. */
  forgetQuiet(): void {
    const now = this.clock.now();
    for (const [endpointId, parking] of this.endpoints) {
      if (now - parking.loggedAt >= 2 * PARKING_LOG_INTERVAL_MS) this.endpoints.delete(endpointId);
    }
  }
}
