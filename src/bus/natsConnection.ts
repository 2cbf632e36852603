import { sleep } from '../platform/sleep.ts';
import { readFileSync } from 'node:fs';
import { connect, credsAuthenticator, errors, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import type { TlsFiles } from '../config/config.ts';
import { isCertificateError, untrustedCertificateMessage } from '../platform/tlsFailure.ts';
import type { Logger } from '../platform/logger.ts';
import { systemClock } from '../platform/clock.ts';

export interface BusConnection {
  readonly nc: NatsConnection;
  /** True between a successful (re)connect and the next disconnect. */
  connected(): boolean;
  /** Readiness: a round trip to the server. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface BusSecurity {
  /** Set: TLS is required, verified against caFile (or the system CAs), with a client certificate if given. */
  readonly tls?: TlsFiles;
  /** A credentials file (user JWT and NKey seed); read again on every reconnect, so a rotated file is used. */
  readonly credsFile?: string;
}

/** A first connection that cannot succeed by waiting: the configuration must change. */
export class BusConnectError extends Error {
  override name = 'BusConnectError';
}

const RECONNECT_WAIT_MS = 1_000;
// While NATS is unreachable at start, one log line per this long rather than one per attempt.
const FIRST_CONNECT_LOG_INTERVAL_MS = 15_000;

/**
 * Connects to NATS and keeps reconnecting forever: a NATS restart must not need a pod restart. Status
 * changes are logged so an outage shows up in the logs as well as in /readyz.
 *
 * The first connection is retried here rather than by the client's waitOnFirstConnect, which retries
 * silently: each failure is logged, and an untrusted server certificate or refused credentials end the
 * start-up with an error that says which setting to fix.
 */
export async function connectBus(url: string, name: string, log: Logger, security: BusSecurity = {}): Promise<BusConnection> {
  const options: NodeConnectionOptions = {
    servers: url.split(',').map((server) => server.trim()),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: RECONNECT_WAIT_MS,
    pingInterval: 10_000,
    ...(security.tls && {
      tls: { caFile: security.tls.caFile, certFile: security.tls.certFile, keyFile: security.tls.keyFile },
    }),
    ...(security.credsFile !== undefined && {
      authenticator: credsAuthenticator(() => readFileSync(security.credsFile!)),
    }),
  };
  const nc = await firstConnection(options, security, log);
  let isConnected = true;
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') {
        isConnected = false;
        log.warn({ server: status.server }, 'NATS disconnected; reconnecting');
      } else if (status.type === 'reconnect') {
        isConnected = true;
        log.info({ server: status.server }, 'NATS reconnected');
      } else if (status.type === 'error') {
        log.warn({ err: status.error }, 'NATS connection error');
      }
    }
  })();
  return {
    nc,
    connected: () => isConnected && !nc.isClosed(),
    async ping() {
      if (!isConnected || nc.isClosed()) throw new Error('not connected to NATS');
      await nc.flush();
    },
    async close() {
      if (nc.isClosed()) return;
      await nc.drain().catch(() => nc.close());
    },
  };
}

async function firstConnection(options: NodeConnectionOptions, security: BusSecurity, log: Logger): Promise<NatsConnection> {
  let lastLogged = 0;
  for (;;) {
    try {
      return await connect(options);
    } catch (error) {
      if (isCertificateError(error)) {
        throw new BusConnectError(untrustedCertificateMessage('NATS', 'NATS_TLS_CA', error), { cause: error });
      }
      if (error instanceof errors.AuthorizationError) {
        throw new BusConnectError(`NATS: the server refused the credentials (${error.message}); check NATS_CREDS or the user in NATS_URL`, {
          cause: error,
        });
      }
      // A server that verifies client certificates drops a TLS connection without one before saying why.
      const hint =
        security.tls !== undefined && security.tls.certFile === undefined && error instanceof errors.TimeoutError
          ? 'if the server requires client certificates, set NATS_TLS_CERT and NATS_TLS_KEY'
          : undefined;
      if (systemClock.now() - lastLogged >= FIRST_CONNECT_LOG_INTERVAL_MS) {
        lastLogged = systemClock.now();
        log.warn({ err: error, hint }, 'cannot connect to NATS; retrying');
      }
      await sleep(RECONNECT_WAIT_MS);
    }
  }
}
