import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../platform/logger.ts';

export interface BusConnection {
  readonly nc: NatsConnection;
  /** True between a successful (re)connect and the next disconnect. */
  connected(): boolean;
  /** Readiness: a round trip to the server. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Connects to NATS and keeps reconnecting forever: a NATS restart must not need a pod restart. Status
 * changes are logged so an outage shows up in the logs as well as in /readyz.
 */
export async function connectBus(url: string, name: string, log: Logger): Promise<BusConnection> {
  const nc = await connect({
    servers: url.split(',').map((server) => server.trim()),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 1_000,
    waitOnFirstConnect: true,
    pingInterval: 10_000,
  });
  let isConnected = true;
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') {
        isConnected = false;
        log.warn({ server: status.server }, 'NATS disconnected; reconnecting');
      } else if (status.type === 'reconnect') {
        isConnected = true;
        log.info({ server: status.server }, 'NATS reconnected');
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
