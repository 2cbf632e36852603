import type { Redis } from 'ioredis';
import type { Gauge } from 'prom-client';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import { rateLimiterMetrics } from './rateLimiterMetrics.ts';

/** The buckets of docs/api.md "Rate limits": `read` for GET, `write` for POST and DELETE; `auth` counts failed logins per address. */
export type Bucket = 'read' | 'write' | 'auth';

export interface BucketLimits {
  readonly read: number;
  readonly write: number;
  readonly auth: number;
}

export interface LimitDecision {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  /** Whole seconds until the window resets (≥ 1): the truthful Retry-After. */
  readonly resetSeconds: number;
}

const FALLBACK_LOG_INTERVAL_MS = 30_000;

/**
 * Per-key token windows shared by every api instance through Redis. When Redis is unreachable each
 * instance falls back to an in-memory limiter of its own, so customers keep being served (with each
 * instance enforcing the full limit) instead of getting 500s; the fallback is logged, exported as
 * `audit_rate_limiter_fallback_active` and shown on /readyz, and shared state resumes as soon as Redis answers.
 */
export class KeyRateLimiter {
  private readonly limits: BucketLimits;
  private readonly shared: Record<Bucket, RateLimiterRedis>;
  private readonly local: Record<Bucket, RateLimiterMemory>;
  private readonly log: Logger;
  private readonly clock: Clock;
  /** audit_rate_limiter_fallback_active: 1 while the limits are kept in this instance's memory. */
  private readonly fallbackGauge: Gauge | undefined;
  private fallbackSince: number | undefined;
  private lastFallbackLog = 0;

  constructor(options: {
    redis: Redis;
    limits: BucketLimits;
    log: Logger;
    metrics?: ServiceMetrics;
    keyPrefix?: string;
    windowSeconds?: number;
    /** Times the fallback: since when, and when it was last logged. */
    clock?: Clock;
  }) {
    this.limits = options.limits;
    this.clock = options.clock ?? systemClock;
    this.log = options.log;
    this.fallbackGauge = options.metrics && rateLimiterMetrics(options.metrics).fallback;
    const prefix = options.keyPrefix ?? 'audit-trail:rl';
    const duration = options.windowSeconds ?? 60;
    const buckets: Bucket[] = ['read', 'write', 'auth'];
    this.shared = Object.fromEntries(
      buckets.map((bucket) => [
        bucket,
        new RateLimiterRedis({
          storeClient: options.redis,
          keyPrefix: `${prefix}:${bucket}`,
          points: options.limits[bucket],
          duration,
          // Fail over at once instead of queueing behind a dead connection.
          rejectIfRedisNotReady: true,
        }),
      ]),
    ) as Record<Bucket, RateLimiterRedis>;
    this.local = Object.fromEntries(
      buckets.map((bucket) => [
        bucket,
        new RateLimiterMemory({ keyPrefix: `${prefix}:${bucket}`, points: options.limits[bucket], duration }),
      ]),
    ) as Record<Bucket, RateLimiterMemory>;
    this.fallbackGauge?.set(0);
  }

  /** The budget of a bucket per window. */
  limitOf(bucket: Bucket): number {
    return this.limits[bucket];
  }

  /** True while limits are enforced per instance because Redis is unreachable. */
  get degraded(): boolean {
    return this.fallbackSince !== undefined;
  }

  /** Spends `points` of the key's budget (one per request; prepaidReads.ts buys several at once). */
  async consume(bucket: Bucket, id: string, points = 1): Promise<LimitDecision> {
    const limit = this.limits[bucket];
    let outcome: RateLimiterRes | unknown;
    let allowed: boolean;
    try {
      outcome = await this.shared[bucket].consume(id, points);
      allowed = true;
      this.recovered();
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) {
        outcome = rejection;
        allowed = false;
        this.recovered();
      } else {
        this.fellBack(rejection);
        try {
          outcome = await this.local[bucket].consume(id, points);
          allowed = true;
        } catch (localRejection) {
          outcome = localRejection;
          allowed = false;
        }
      }
    }
    const result = outcome as RateLimiterRes;
    return {
      allowed,
      limit,
      remaining: Math.max(0, result.remainingPoints),
      resetSeconds: Math.max(1, Math.ceil(result.msBeforeNext / 1000)),
    };
  }

  private fellBack(error: unknown): void {
    const now = this.clock.now();
    if (this.fallbackSince === undefined) {
      this.fallbackSince = now;
      this.fallbackGauge?.set(1);
    }
    if (now - this.lastFallbackLog >= FALLBACK_LOG_INTERVAL_MS) {
      this.lastFallbackLog = now;
      this.log.warn(
        { err: error, since: new Date(this.fallbackSince).toISOString() },
        'Redis unavailable: rate limits enforced per instance',
      );
    }
  }

  private recovered(): void {
    if (this.fallbackSince === undefined) return;
    this.log.info({ outage_ms: this.clock.now() - this.fallbackSince }, 'Redis reachable again: rate limits shared across instances');
    this.fallbackSince = undefined;
    this.fallbackGauge?.set(0);
  }
}
