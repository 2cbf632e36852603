import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { TlsFiles } from '../config/config.ts';
import type { Logger } from '../platform/logger.ts';
import { isCertificateError, untrustedCertificateMessage } from '../platform/tlsFailure.ts';

const ERROR_LOG_INTERVAL_MS = 30_000;

/**
 * The Redis client behind the rate limiter. Commands fail at once while disconnected (no offline queue),
 * so an outage means the in-memory fallback rather than requests waiting on Redis; the client keeps
 * reconnecting in the background. Connection errors repeat every retry, so they are logged sparingly.
 * A rediss:// URL means TLS; `tls` adds a private CA and a client certificate to it.
 */
export function connectRedis(url: string, log: Logger, tls?: TlsFiles): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    commandTimeout: 500,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
    ...(tls && {
      tls: {
        ...(tls.caFile !== undefined && { ca: readFileSync(tls.caFile) }),
        ...(tls.certFile !== undefined && { cert: readFileSync(tls.certFile) }),
        ...(tls.keyFile !== undefined && { key: readFileSync(tls.keyFile) }),
      },
    }),
  });
  let lastLogged = 0;
  redis.on('error', (error: Error) => {
    const now = Date.now();
    if (now - lastLogged < ERROR_LOG_INTERVAL_MS) return;
    lastLogged = now;
    if (isCertificateError(error)) {
      log.error({ err: error }, untrustedCertificateMessage('Redis', 'REDIS_TLS_CA', error));
    } else {
      log.warn({ err: error }, 'Redis connection error; reconnecting');
    }
  });
  return redis;
}
