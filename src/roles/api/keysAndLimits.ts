import { ApiKeyVerifier } from '../../auth/apiKeyVerifier.ts';
import { KeyRateLimiter } from '../../auth/rateLimiter.ts';
import { connectRedis } from '../../auth/redisConnection.ts';
import type { ReadinessCheck } from '../../http/internalApp.ts';
import type { SharedParts } from '../sharedParts.ts';

/** API keys, cached, with revocations reaching every pod through LISTEN/NOTIFY. */
export async function startKeyVerifier(parts: SharedParts, pepper: string): Promise<ApiKeyVerifier> {
  const { config } = parts;
  const verifier = new ApiKeyVerifier({
    db: parts.db,
    databaseUrl: config.databaseSessionUrl,
    pepper,
    environment: config.keyEnvironment,
    log: parts.log.child({ component: 'key-verifier' }),
  });
  await verifier.start();
  parts.releasers.add('key verifier', () => verifier.stop());
  return verifier;
}

/** Per-key limits shared by every api pod through Redis; the limiter falls back to in-memory without it. */
export function rateLimiterOf(parts: SharedParts): { limiter: KeyRateLimiter; readiness: ReadinessCheck[] } {
  const { config, log } = parts;
  const redis = connectRedis(config.redisUrl, log.child({ component: 'redis' }), config.redisTls, config.redisSentinel);
  parts.releasers.add('redis connection', () => void redis.disconnect());
  const limiter = new KeyRateLimiter({
    redis,
    limits: {
      read: config.rateLimits.readPerMinute,
      write: config.rateLimits.writePerMinute,
      auth: config.rateLimits.authFailuresPerMinute,
    },
    log: log.child({ component: 'rate-limiter' }),
    metrics: parts.metrics,
    keyPrefix: config.rateLimits.keyPrefix,
    windowSeconds: config.rateLimits.windowSeconds,
  });
  const check = async () => {
    await redis.ping();
  };
  return { limiter, readiness: [{ name: 'redis', critical: false, check }] };
}
