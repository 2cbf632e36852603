import type { Config } from '../config/config.ts';
import type { DestinationOptions } from '../streams/destinations/openDestination.ts';
import { StreamRunner } from '../streams/streamRunner.ts';
import type { Role } from './role.ts';

/** How the service reaches stream destinations: the streams role's sends, and the api role's test sends. */
export function destinationOptions(config: Config): DestinationOptions {
  return {
    timeoutMs: config.streams.timeoutMs,
    allowPrivateTargets: config.webhookAllowPrivateTargets,
    hecAckTimeoutMs: config.streams.hecAckTimeoutMs,
  };
}

/**
 * Log streams: a StreamRunner sharing the deployment's streams with the other processes of the role. It
 * reads the trail (sealed leaves) and the destinations' sealed secrets.
 */
export const role: Role = {
  async start(parts) {
    const { config } = parts;
    const runner = new StreamRunner({
      db: parts.db,
      secrets: parts.secretBox('the streams role'),
      destinations: destinationOptions(config),
      pollMs: config.streams.pollMs,
      leaseMs: config.streams.leaseMs,
      capacity: config.streams.perProcess,
      failingRetryMs: config.streams.failingRetryMs,
      log: parts.log.child({ role: 'streams' }),
      metrics: parts.metrics,
      databaseUrl: config.databaseUrl,
    });
    runner.start();
    parts.releasers.add('log streams', () => runner.stop());
    return {};
  },
};
