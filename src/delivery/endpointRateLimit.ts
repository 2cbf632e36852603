import type { Redis } from 'ioredis';
import type { Clock } from '../platform/clock.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { deliveryMetrics } from './deliveryMetrics.ts';

/**
 * Per-endpoint rate limits (docs/webhooks.md "Delivery settings"): at most N deliveries a second to an
 * endpoint over every worker of every pod, spread evenly, in bursts of at most burstOf(N). Each request needs
 * a permit; workers take them in small batches from one bucket per endpoint in Redis, with Redis' clock, so
 * that pods with skewed clocks still share one schedule.
 *
 * The bucket is GCRA (the generic cell rate algorithm): the bucket is the instant `tat` from which the next
 * permit is free; a permit costs one interval (1/N s) and may be taken up to `burst` intervals early. Any
 * second then holds at most N + burst starts. grantPermits is the rule; the Lua script below is the same
 * rule run atomically in Redis.
 *
 * When Redis does not answer, each worker keeps a bucket of its own with the same rule, so a receiver may get
 * up to N per second per worker until Redis is back (logged, and `webhook_rate_limit_fallback_active` is 1):
 * deliveries go on, at a bounded rate, rather than stopping with Redis.
 */

/** The permits a lane may start with at once: a tenth of a second's worth, at least one. */
export function burstOf(ratePerS: number): number {
  return Math.max(1, Math.ceil(ratePerS / 10));
}

export interface PermitGrant {
  readonly granted: number;
  /** When none or not all were granted: milliseconds until the next one is free. */
  readonly retryInMs: number;
}

/**
 * A permit's cost in whole microseconds, rounded up (at most 0.1 % slower at 1,000 a second): the rule's
 * arithmetic stays exact, where a fractional interval once made floor() round a whole permit away.
 */
export function intervalOf(ratePerS: number): number {
  return Math.ceil(1_000_000 / ratePerS);
}

/** GCRA, in whole microseconds: the permits granted of `wanted`, the bucket's new `tat`, and when to ask again. */
export function grantPermits(
  tatUs: number,
  nowUs: number,
  intervalUs: number,
  burst: number,
  wanted: number,
): PermitGrant & { readonly tatUs: number } {
  const from = Math.max(tatUs, nowUs);
  const available = Math.floor((nowUs + burst * intervalUs - from) / intervalUs);
  const granted = Math.max(0, Math.min(wanted, available));
  const tat = from + granted * intervalUs;
  const retryInMs = granted < wanted ? Math.max(1, Math.ceil((tat + intervalUs - (nowUs + burst * intervalUs)) / 1000)) : 0;
  return { granted, retryInMs, tatUs: tat };
}

/** grantPermits in Redis, on Redis' clock; the key expires once its schedule lies in the past. */
const TAKE_PERMITS_LUA = `
local now = redis.call('TIME')
local nowUs = tonumber(now[1]) * 1000000 + tonumber(now[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local wanted = tonumber(ARGV[3])
local from = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), nowUs)
local available = math.floor((nowUs + burst * interval - from) / interval)
local granted = math.max(0, math.min(wanted, available))
local tat = from + granted * interval
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - nowUs) / 1000) + 1000)
local retry = 0
if granted < wanted then retry = math.max(1, math.ceil((tat + interval - (nowUs + burst * interval)) / 1000)) end
return {granted, retry}`;

const KEY_PREFIX = 'audit-trail:webhook-rate:';
const FALLBACK_LOG_INTERVAL_MS = 30_000;

type RedisWithPermits = Redis & {
  auditTakePermits(key: string, intervalUs: number, burst: number, wanted: number): Promise<[number, number]>;
};

export interface EndpointRateLimitOptions {
  /** The shared buckets; without it (no Redis configured) every worker keeps its own. */
  readonly redis: Redis | undefined;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
}

export class EndpointRateLimit {
  private readonly options: EndpointRateLimitOptions;
  private readonly redis: RedisWithPermits | undefined;
  /** This worker's own buckets (their `tat` in µs), used while Redis does not answer. */
  private readonly local = new Map<string, number>();
  private fallbackSince: number | undefined;
  private lastFallbackLog = 0;

  constructor(options: EndpointRateLimitOptions) {
    this.options = options;
    if (options.redis) {
      options.redis.defineCommand('auditTakePermits', { numberOfKeys: 1, lua: TAKE_PERMITS_LUA });
      this.redis = options.redis as RedisWithPermits;
    }
    deliveryMetrics(options.metrics).rateLimitFallback.set(0);
  }

  /** Up to `wanted` permits for requests to `endpointId`, limited to `ratePerS`. Never rejects. */
  async take(endpointId: string, ratePerS: number, wanted: number): Promise<PermitGrant> {
    const intervalUs = intervalOf(ratePerS);
    const burst = burstOf(ratePerS);
    if (this.redis) {
      try {
        const [granted, retryInMs] = await this.redis.auditTakePermits(`${KEY_PREFIX}${endpointId}`, intervalUs, burst, wanted);
        this.recovered();
        return { granted, retryInMs };
      } catch (error) {
        this.fellBack(error);
      }
    }
    const nowUs = this.options.clock.now() * 1000;
    const grant = grantPermits(this.local.get(endpointId) ?? 0, nowUs, intervalUs, burst, wanted);
    this.local.set(endpointId, grant.tatUs);
    return grant;
  }

  /** Forgets this worker's own buckets whose schedule lies in the past (they hold nothing a new one would not). */
  forgetIdle(): void {
    const nowUs = this.options.clock.now() * 1000;
    for (const [endpointId, tatUs] of this.local) if (tatUs < nowUs) this.local.delete(endpointId);
  }

  private fellBack(error: unknown): void {
    const now = this.options.clock.now();
    if (this.fallbackSince === undefined) {
      this.fallbackSince = now;
      deliveryMetrics(this.options.metrics).rateLimitFallback.set(1);
    }
    if (now - this.lastFallbackLog < FALLBACK_LOG_INTERVAL_MS) return;
    this.lastFallbackLog = now;
    this.options.log.warn(
      { err: error, since: new Date(this.fallbackSince).toISOString() },
      'Redis unavailable: webhook rate limits enforced by each worker on its own',
    );
  }

  private recovered(): void {
    if (this.fallbackSince === undefined) return;
    this.options.log.info(
      { outage_ms: this.options.clock.now() - this.fallbackSince },
      'Redis reachable again: webhook rate limits shared',
    );
    this.fallbackSince = undefined;
    deliveryMetrics(this.options.metrics).rateLimitFallback.set(0);
  }
}
