import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { TlsFiles } from '../config/config.ts';
import type { Logger } from '../platform/logger.ts';
import { isCertificateError, untrustedCertificateMessage } from '../platform/tlsFailure.ts';
import { systemClock } from '../platform/clock.ts';

const ERROR_LOG_INTERVAL_MS = 30_000;

/** Redis Sentinel: where the sentinels are, and the name of the master they watch. */
export interface RedisSentinelSettings {
  readonly name: string;
  readonly sentinels: readonly { readonly host: string; readonly port: number }[];
}

/**
 * The Redis client behind the rate limiter. Commands fail at once while disconnected (no offline queue),
 * so an outage means the in-memory fallback rather than requests waiting on Redis; the client keeps
 * reconnecting in the background. Connection errors repeat every retry, so they are logged sparingly.
 * A rediss:// URL means TLS; `tls` adds a private CA and a client certificate to it.
 *
 * With `sentinel`, the master is whichever server the sentinels name: asked at each (re)connect, and again
 * when they announce a failover (+switch-master). A server that answers READONLY has been demoted under us (a
 * planned switchover): the client reconnects, to the new master. Commands fail meanwhile, as in an outage.
 */
export function connectRedis(url: string, log: Logger, tls?: TlsFiles, sentinel?: RedisSentinelSettings): Redis {
  const redis = new Redis(url, {
    ...(sentinel && {
      name: sentinel.name,
      sentinels: sentinel.sentinels.map(({ host, port }) => ({ host, port })),
      failoverDetector: true,
      sentinelRetryStrategy: (attempt: number) => Math.min(attempt * 200, 2_000),
      ...(tls && { enableTLSForSentinelMode: true }),
      // READONLY is the error code (the reply's first word) of a write to a replica.
      reconnectOnError: (error: Error) => error.message.startsWith('READONLY'),
    }),
    // Shown by CLIENT LIST, so an operator (and the failover test) can tell the service's connections apart.
    connectionName: 'audit-trail',
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
    const now = systemClock.now();
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
