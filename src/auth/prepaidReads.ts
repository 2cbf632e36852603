import { systemClock, type Clock } from '../platform/clock.ts';
import type { KeyRateLimiter, LimitDecision } from './rateLimiter.ts';

/**
 * Reads charged to a key's read budget in blocks rather than one Redis round trip each: a monitor reading a
 * log's tiles makes thousands of small requests whose answers never change, and the limiter's round trip was
 * the largest cost of each after the key check (BENCHMARKS.md, "Tiles"). The first read of a block buys
 * BLOCK points of the key's shared budget at once; the next ones of this instance spend them here.
 *
 * The budget is never exceeded: every read is paid for in the shared window before it is served, points
 * bought in one window are spent only within it (a block left over when it ends is lost, not carried), and a
 * purchase is refused exactly as a read would be. What it costs a key is the other way: near its limit, the
 * points an instance holds unspent are missing from the others' budgets, so a key may be refused up to a
 * block's worth of reads per instance early; once the key is known to be near its limit, an instance buys only
 * what is left. The key is still checked on every request, before this; the budget is the key's alone.
 */

const DEFAULT_BLOCK = 16;
const MAX_KEYS = 50_000;

interface Held {
  /** Points bought and not yet spent. */
  left: number;
  /** Until when they may be spent: before the window they were bought in resets. */
  readonly until: number;
  /** What the shared budget had left after the purchase. */
  readonly remaining: number;
  readonly limit: number;
}

export class PrepaidReads {
  private readonly limiter: KeyRateLimiter;
  private readonly block: number;
  private readonly clock: Clock;
  private readonly held = new Map<string, Held>();
  private readonly buying = new Map<string, Promise<LimitDecision>>();

  constructor(limiter: KeyRateLimiter, options: { block?: number; clock?: Clock } = {}) {
    this.limiter = limiter;
    this.block = options.block ?? DEFAULT_BLOCK;
    this.clock = options.clock ?? systemClock;
  }

  /** Spends one read of the key's budget: from a block this instance holds, or from one it buys now. */
  async consume(id: string): Promise<LimitDecision> {
    for (;;) {
      const held = this.held.get(id);
      const now = this.clock.now();
      if (held && held.left > 0 && now < held.until) {
        held.left -= 1;
        return {
          allowed: true,
          limit: held.limit,
          remaining: held.remaining + held.left,
          resetSeconds: Math.max(1, Math.ceil((held.until - now) / 1000)),
        };
      }
      // One purchase at a time per key: the reads arriving meanwhile wait for it and spend its points.
      const buying = this.buying.get(id);
      if (buying !== undefined) {
        const decision = await buying;
        if (!decision.allowed) return decision;
        continue;
      }
      const purchase = this.buy(id, held).finally(() => this.buying.delete(id));
      this.buying.set(id, purchase);
      return purchase;
    }
  }

  /** Buys a block (or what is left of the budget, when less) and spends its first point on the caller's read. */
  private async buy(id: string, previous: Held | undefined): Promise<LimitDecision> {
    const knownLeft = previous && this.clock.now() < previous.until ? previous.remaining : Number.POSITIVE_INFINITY;
    const points = Math.max(1, Math.min(this.block, this.limiter.limitOf('read'), knownLeft));
    const decision = await this.limiter.consume('read', id, points);
    this.held.delete(id);
    if (!decision.allowed) return decision;
    // resetSeconds is rounded up; a whole second less keeps every point within the window it was bought in.
    const until = this.clock.now() + (decision.resetSeconds - 1) * 1000;
    if (points > 1 && until > this.clock.now()) {
      if (this.held.size >= MAX_KEYS) this.held.delete(this.held.keys().next().value!);
      this.held.set(id, { left: points - 1, until, remaining: decision.remaining, limit: decision.limit });
    }
    return { ...decision, remaining: decision.remaining + points - 1 };
  }
}
