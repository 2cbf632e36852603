/**
 * Per-endpoint lanes of a worker: at most `concurrency` requests in flight to one endpoint, a queue behind
 * them, and the judgement of which endpoints keep up. A hung receiver holds at most its own slots; what
 * its lane cannot take is handed back (overflow) to be parked in Postgres, never blocking the consumer.
 */

/**
 * Items a slow endpoint may have waiting beyond its concurrency; the rest overflows. An endpoint is slow
 * when all its slots are busy and none finished for a while, or when what it has waiting has waited long:
 * requests that each end at a time limit shorter than SLOW_AFTER_MS finish often enough for the first
 * test never to hold, yet the queue behind them barely moves. A fast endpoint's queue drains as it fills
 * and may grow to the hard cap.
 */
const SLOW_ENDPOINT_QUEUE_PER_SLOT = 4;
const ENDPOINT_QUEUE_HARD_CAP = 5_000;
const SLOW_AFTER_MS = 1_000;
/**
 * Twice the longest a healthy endpoint's queue waited in bench/delivery.ts (the worker's whole 2,000 held
 * for one endpoint, drained at 2,000-5,000 a second: at most a second on a loaded machine).
 */
const SLOW_QUEUE_WAIT_MS = 2_000;

interface Lane<T> {
  inFlight: number;
  /** Last time a request to the endpoint finished (or the lane opened). */
  lastFinishedAt: number;
  /** Requests finished so far: a lane with none has not shown it keeps up. */
  finished: number;
  /** In arrival order, each with the time it was queued. */
  readonly waiting: Array<Waiting<T>>;
}

interface Waiting<T> {
  readonly item: T;
  readonly since: number;
}

export interface EndpointLanesOptions<T> {
  /** Requests in flight to one endpoint. */
  readonly concurrency: number;
  /** Makes the request of one item; the lane's slot is held until it settles. */
  readonly send: (endpointId: string, item: T) => Promise<void>;
  /** A slot freed (the worker may pull again). */
  readonly onSlotFreed: () => void;
}

export type Admission = 'sent' | 'queued' | 'overflow';

export class EndpointLanes<T> {
  private readonly options: EndpointLanesOptions<T>;
  private readonly lanes = new Map<string, Lane<T>>();
  private readonly sending = new Set<Promise<void>>();

  constructor(options: EndpointLanesOptions<T>) {
    this.options = options;
  }

  /**
   * Sends at once when the endpoint has a free slot, else queues within its cap; `overflow` when neither,
   * which happens only while all its slots are busy.
   */
  admit(endpointId: string, item: T): Admission {
    const lane = this.laneOf(endpointId);
    if (lane.inFlight < this.options.concurrency) {
      this.dispatch(endpointId, lane, item);
      return 'sent';
    }
    if (lane.waiting.length < this.queueCapOf(lane)) {
      lane.waiting.push({ item, since: Date.now() });
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
      for (const { item } of lane.waiting.splice(cap)) excess.push({ endpointId, item });
    }
    return excess;
  }

  /** Items queued or in flight for endpoints that have not shown they keep up (slow, or none finished). */
  heldByUnprovenEndpoints(): number {
    let held = 0;
    for (const lane of this.lanes.values()) {
      if (lane.finished === 0 || this.isSlow(lane)) held += lane.waiting.length + lane.inFlight;
    }
    return held;
  }

  /** Everything still queued (when stopping); requests in flight go on. */
  takeWaiting(): T[] {
    return [...this.lanes.values()].flatMap((lane) => lane.waiting.splice(0).map(({ item }) => item));
  }

  /** Resolves when every request in flight has settled. */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.sending]);
  }

  private isSlow(lane: Lane<T>): boolean {
    const now = Date.now();
    if (lane.inFlight >= this.options.concurrency && now - lane.lastFinishedAt > SLOW_AFTER_MS) return true;
    const oldest = lane.waiting[0];
    return oldest !== undefined && now - oldest.since > SLOW_QUEUE_WAIT_MS;
  }

  private queueCapOf(lane: Lane<T>): number {
    return this.isSlow(lane) ? this.options.concurrency * SLOW_ENDPOINT_QUEUE_PER_SLOT : ENDPOINT_QUEUE_HARD_CAP;
  }

  private dispatch(endpointId: string, lane: Lane<T>, item: T): void {
    lane.inFlight += 1;
    const task = this.options.send(endpointId, item).finally(() => {
      lane.inFlight -= 1;
      lane.finished += 1;
      lane.lastFinishedAt = Date.now();
      const next = lane.waiting.shift();
      if (next !== undefined) this.dispatch(endpointId, lane, next.item);
      else if (lane.inFlight === 0) this.lanes.delete(endpointId);
      this.options.onSlotFreed();
    });
    this.sending.add(task);
    void task.finally(() => this.sending.delete(task));
  }

  private laneOf(endpointId: string): Lane<T> {
    let lane = this.lanes.get(endpointId);
    if (!lane) {
      lane = { inFlight: 0, lastFinishedAt: Date.now(), finished: 0, waiting: [] };
      this.lanes.set(endpointId, lane);
    }
    return lane;
  }
}
