import { Redis } from 'ioredis';
import type { Logger } from '../platform/logger.ts';

const ERROR_LOG_INTERVAL_MS = 30_000;

/**
 * The Redis client behind the rate limiter. Commands fail at once while disconnected (no offline queue),
 * so an outage means the in-memory fallback rather than requests waiting on Redis; the client keeps
 * reconnecting in the background. Connection errors repeat every retry, so they are logged sparingly.
 */
export function connectRedis(url: string, log: Logger): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    commandTimeout: 500,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
  });
  let lastLogged = 0;
  redis.on('error', (error: Error) => {
    const now = Date.now();
    if (now - lastLogged < ERROR_LOG_INTERVAL_MS) return;
    lastLogged = now;
    log.warn({ err: error }, 'Redis connection error; reconnecting');
  });
  return redis;
}
