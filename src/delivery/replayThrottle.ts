/**
 * How fast a replay may go, decided without I/O (the runner, replayRunner.ts, reads the counts and carries
 * the answer out). A replay tops its endpoint's pending deliveries up to a cap, a chunk at a time, so that at
 * most that many replayed deliveries are ever queued ahead of a live one; while other endpoints have
 * deliveries in flight, and for a while after, the cap is low, which gives live traffic the priority.
 */

/** What a replay keeps pending beside live traffic (see replayRunner.ts for how these were chosen). */
const MAX_PENDING_BESIDE_LIVE_TRAFFIC = 100;
/**
 * Live traffic seen this recently still counts: paced live deliveries finish between arrivals, and a cap
 * raised in such a gap let a chunk of 500 in ahead of the next ones (a cap following each instant's
 * in-flight count raised live deliveries' p99 several times over in bench/replay.ts).
 */
const LIVE_TRAFFIC_MEMORY_MS = 5_000;
/** Chunks smaller than this wait for more room: each chunk is a transaction and a relay wake-up. */
const MIN_CHUNK = 50;
/** How long a replay with no room waits before it looks again. */
const THROTTLE_WAIT_MS = 20;

export interface ReplayLimits {
  /** Events scanned per transaction, at most. */
  readonly chunkSize: number;
  /** Deliveries of its endpoint a replay keeps pending when there is no live traffic. */
  readonly maxPending: number;
}

export interface LiveTraffic {
  readonly nowMs: number;
  /** When live traffic (another endpoint's delivery in flight) was last seen; 0: never. */
  readonly seenAtMs: number;
  /** Whether another endpoint has a delivery in flight now. */
  readonly now: boolean;
}

/**
 * The most deliveries of its endpoint a replay may have pending now (few beside live traffic), and when live
 * traffic was last seen after this look.
 */
export function pendingCap(limits: ReplayLimits, traffic: LiveTraffic): { readonly cap: number; readonly seenAtMs: number } {
  const seenAtMs = traffic.now ? traffic.nowMs : traffic.seenAtMs;
  const live = traffic.nowMs - seenAtMs < LIVE_TRAFFIC_MEMORY_MS;
  return { cap: live ? Math.min(limits.maxPending, MAX_PENDING_BESIDE_LIVE_TRAFFIC) : limits.maxPending, seenAtMs };
}

export type ReplayStep = { readonly kind: 'chunk'; readonly size: number } | { readonly kind: 'wait'; readonly ms: number };

/** A chunk that fills the room under the cap, or a short wait when the room is too small to be worth one. */
export function nextReplayStep(limits: ReplayLimits, cap: number, pending: number): ReplayStep {
  const room = Math.min(limits.chunkSize, cap - pending);
  return room < Math.min(MIN_CHUNK, cap) ? { kind: 'wait', ms: THROTTLE_WAIT_MS } : { kind: 'chunk', size: room };
}
