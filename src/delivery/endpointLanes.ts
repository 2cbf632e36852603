import { systemClock } from '../platform/clock.ts';

/**
 * Per-endpoint lanes of a worker: at most `concurrency` requests in flight to one endpoint, at most
 * `maxInFlight` over all of them (each request holds a socket: the worker's socket cap), a queue behind
 * them, and the judgement of which endpoints keep up. A hung receiver holds at most its own slots; what
 * its lane cannot take is handed back (overflow) to be parked in Postgres, never blocking the consumer.
 *
 * The cap is shared so that no endpoint waits behind others that hang: a lane's first request in flight
 * may take any free slot, but its further ones only the first three quarters of the cap, and at most
 * maxInFlight / (lanes + 1) of it (never more than `concurrency`). So while fewer than a quarter of the
 * cap's worth of endpoints have requests in flight, a lane with none sends at once, however many of the
 * others hang and however many requests they hold; a slot that frees goes to the waiting lane with the
 * fewest requests in flight. A hung endpoint's requests end at the time limit, so the shares even out
 * within one DELIVERY_TIMEOUT_MS.
 *
 * An endpoint may bring limits of its own (LaneLimits): a lower concurrency (1 for an ordered one), and a
 * rate, for which every request needs a permit (endpointRateLimit.ts); a lane asks for permits as its queue
 * needs them, one request for them at a time, and while it waits for them it counts as slow: its queue is
 * kept short and its excess overflows, so a throttled endpoint never stops the worker from pulling.
 */

/**
 * Items a slow endpoint may have waiting beyond its concurrency; the rest overflows. An endpoint is slow
 * when all its slots are busy and it has answered none of them for a while: requests that end at a time
 * limit do not count, or with a DELIVERY_TIMEOUT_MS under SLOW_AFTER_MS a receiver that never answers would
 * finish one often enough never to look slow (and its queue, counted as held for an endpoint that keeps
 * up, would stop the worker from pulling anyone's deliveries). A fast endpoint's queue drains as it fills
 * and may grow to the hard cap.
 */
const SLOW_ENDPOINT_QUEUE_PER_SLOT = 4;
const ENDPOINT_QUEUE_HARD_CAP = 5_000;
const SLOW_AFTER_MS = 1_000;

/** What an endpoint asks of its lane beyond the worker's defaults. */
export interface LaneLimits {
  /** Requests in flight at most (never more than the worker's per-endpoint concurrency). */
  readonly concurrency: number;
  /** Requests started per second at most, over every worker; undefined for no limit. */
  readonly ratePerS: number | undefined;
}

interface Lane<T> {
  readonly endpointId: string;
  limits: LaneLimits | undefined;
  /** Permits held for requests not yet started (rate-limited lanes). */
  permits: number;
  /** A request for permits is under way, or waits for its retry time. */
  asking: boolean;
  inFlight: number;
  /** Last time the endpoint answered a request, whatever the status (or the lane opened). */
  lastAnsweredAt: number;
  /** Requests answered so far: a lane with none has not shown it keeps up. */
  answered: number;
  readonly waiting: T[];
}

export interface EndpointLanesOptions<T> {
  /** Requests in flight to one endpoint. */
  readonly concurrency: number;
  /** Requests in flight over all endpoints: DELIVERY_MAX_SOCKETS. */
  readonly maxInFlight: number;
  /**
   * Makes the request of one item; the lane's slot is held until it settles, with whether the endpoint
   * answered (any status) rather than timing out or failing to connect.
   */
  readonly send: (endpointId: string, item: T) => Promise<boolean>;
  /** A slot freed (the worker may pull again). */
  readonly onSlotFreed: () => void;
  /** Permits for a rate-limited endpoint: granted now, and when to ask again if short. Never rejects. */
  readonly permits?: (endpointId: string, ratePerS: number, wanted: number) => Promise<{ granted: number; retryInMs: number }>;
  /** Schedules a retry of a permit request (a timer). */
  readonly later?: (ms: number, run: () => void) => void;
  /** The time, in milliseconds, that tells a slow endpoint (no answer for a while) from a busy one. */
  readonly now?: () => number;
}

export type Admission = 'sent' | 'queued' | 'overflow';

export class EndpointLanes<T> {
  private readonly options: EndpointLanesOptions<T>;
  private readonly lanes = new Map<string, Lane<T>>();
  private readonly sending = new Set<Promise<void>>();
  private inFlight = 0;

  private readonly now: () => number;

  constructor(options: EndpointLanesOptions<T>) {
    this.options = options;
    this.now = options.now ?? systemClock.now;
  }

  /**
   * Sends at once when the endpoint has a free slot (and a permit, when rate-limited), else queues within its
   * cap; `overflow` when neither, which happens only while all its slots are busy or it waits for permits.
   * `limits`: the endpoint's own, as last read (they apply from now on).
   */
  admit(endpointId: string, item: T, limits?: LaneLimits): Admission {
    const lane = this.laneOf(endpointId);
    lane.limits = limits;
    if (lane.waiting.length === 0 && this.mayDispatch(lane)) {
      this.dispatch(endpointId, lane, item);
      return 'sent';
    }
    if (lane.waiting.length < this.queueCapOf(lane)) {
      lane.waiting.push(item);
      // Waiting for a permit: ask for one now that a request needs it.
      this.throttled(lane);
      return 'queued';
    }
    return 'overflow';
  }

  /** Lanes that turned slow keep only their slow-lane queue; the excess is returned, with its endpoint. */
  trimSlowLanes(): Array<{ endpointId: string; item: T }> {
    const excess: Array<{ endpointId: string; item: T }> = [];
    for (const [endpointId, lane] of this.lanes) {
      const cap = this.queueCapOf(lane);
      if (lane.waiting.length <= cap) continue;
      for (const item of lane.waiting.splice(cap)) excess.push({ endpointId, item });
      if (lane.inFlight === 0 && lane.waiting.length === 0) this.lanes.delete(endpointId);
    }
    return excess;
  }

  /** Items queued or in flight for endpoints that have not shown they keep up (slow, or none finished). */
  heldByUnprovenEndpoints(): number {
    let held = 0;
    for (const lane of this.lanes.values()) {
      if (lane.answered === 0 || this.isSlow(lane)) held += lane.waiting.length + lane.inFlight;
    }
    return held;
  }

  /** Everything still queued (when stopping); requests in flight go on. */
  takeWaiting(): T[] {
    const waiting = [...this.lanes.values()].flatMap((lane) => lane.waiting.splice(0));
    for (const [endpointId, lane] of this.lanes) if (lane.inFlight === 0) this.lanes.delete(endpointId);
    return waiting;
  }

  /** Resolves when every request in flight has settled. */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.sending]);
  }

  /** Requests in flight over all lanes (sockets in use). */
  get requestsInFlight(): number {
    return this.inFlight;
  }

  /** A lane's share of the worker's cap, now: see the header. */
  private laneLimit(lane?: Lane<T>): number {
    const share = Math.floor(this.options.maxInFlight / (this.lanes.size + 1));
    return Math.min(this.options.concurrency, lane?.limits?.concurrency ?? Number.POSITIVE_INFINITY, Math.max(1, share));
  }

  private mayDispatch(lane: Lane<T>): boolean {
    const { maxInFlight } = this.options;
    if (this.inFlight >= maxInFlight || this.throttled(lane)) return false;
    if (lane.inFlight === 0) return true;
    // The last quarter of the cap is kept for lanes with nothing in flight (see the header).
    return lane.inFlight < this.laneLimit(lane) && this.inFlight < maxInFlight - Math.floor(maxInFlight / 4);
  }

  /** A rate-limited lane without a permit; asks for some (once at a time) when it has requests waiting. */
  private throttled(lane: Lane<T>): boolean {
    const ratePerS = lane.limits?.ratePerS;
    if (ratePerS === undefined || !this.options.permits || lane.permits > 0) return false;
    if (!lane.asking && lane.waiting.length > 0) this.askPermits(lane, ratePerS);
    return true;
  }

  private askPermits(lane: Lane<T>, ratePerS: number): void {
    lane.asking = true;
    const wanted = Math.max(1, Math.min(lane.waiting.length, this.laneLimit(lane) - lane.inFlight));
    void this.options.permits!(lane.endpointId, ratePerS, wanted).then(({ granted, retryInMs }) => {
      lane.permits += granted;
      if (granted > 0 || !this.options.later) {
        lane.asking = false;
        this.pump();
        return;
      }
      this.options.later(retryInMs, () => {
        lane.asking = false;
        this.pump();
      });
    });
  }

  private isSlow(lane: Lane<T>): boolean {
    // A lane waiting for permits cannot send; its queue is kept short like a hung one's.
    if (lane.limits?.ratePerS !== undefined && lane.permits === 0 && lane.waiting.length > 0) return true;
    // "All its slots busy" is whatever stops it sending more now: its share, or the worker's cap.
    return lane.inFlight > 0 && !this.mayDispatch(lane) && this.now() - lane.lastAnsweredAt > SLOW_AFTER_MS;
  }

  /** Fills free slots of the cap from the waiting lanes, the one with the fewest requests in flight first. */
  private pump(): void {
    while (this.inFlight < this.options.maxInFlight) {
      let next: [string, Lane<T>] | undefined;
      for (const entry of this.lanes) {
        const lane = entry[1];
        if (lane.waiting.length === 0 || !this.mayDispatch(lane)) continue;
        if (!next || lane.inFlight < next[1].inFlight) next = entry;
      }
      if (!next) return;
      this.dispatch(next[0], next[1], next[1].waiting.shift()!);
    }
  }

  private queueCapOf(lane: Lane<T>): number {
    return this.isSlow(lane) ? this.laneLimit(lane) * SLOW_ENDPOINT_QUEUE_PER_SLOT : ENDPOINT_QUEUE_HARD_CAP;
  }

  private dispatch(endpointId: string, lane: Lane<T>, item: T): void {
    if (lane.limits?.ratePerS !== undefined && this.options.permits) lane.permits -= 1;
    lane.inFlight += 1;
    this.inFlight += 1;
    // A send that throws is a bug elsewhere; the slot must come back all the same.
    const sent = this.options.send(endpointId, item).catch(() => false);
    const task = sent.then((answered) => {
      lane.inFlight -= 1;
      this.inFlight -= 1;
      if (answered) {
        lane.answered += 1;
        lane.lastAnsweredAt = this.now();
      }
      if (lane.inFlight === 0 && lane.waiting.length === 0 && !lane.asking) this.lanes.delete(endpointId);
      this.pump();
      this.options.onSlotFreed();
    });
    this.sending.add(task);
    void task.finally(() => this.sending.delete(task));
  }

  private laneOf(endpointId: string): Lane<T> {
    let lane = this.lanes.get(endpointId);
    if (!lane) {
      lane = {
        endpointId,
        limits: undefined,
        permits: 0,
        asking: false,
        inFlight: 0,
        lastAnsweredAt: this.now(),
        answered: 0,
        waiting: [],
      };
      this.lanes.set(endpointId, lane);
    }
    return lane;
  }
}
