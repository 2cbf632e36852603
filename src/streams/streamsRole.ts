import { requireSetting, type Config } from '../config/config.ts';
import type { Database } from '../db/database.ts';
import type { Releasers } from '../platform/lifecycle.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { SecretBox } from '../webhooks/secretBox.ts';
import type { DestinationOptions } from './destinations/openDestination.ts';
import { StreamRunner } from './streamRunner.ts';

/** How the service reaches stream destinations: the streams role's sends, and the api role's test sends. */
export function destinationOptions(config: Config): DestinationOptions {
  return { timeoutMs: config.streams.timeoutMs, allowPrivateTargets: config.webhookAllowPrivateTargets };
}

/**
 * The streams role's wiring (main.ts): a StreamRunner sharing the deployment's streams with the other
 * processes of the role. It reads the trail (sealed leaves) and the destinations' sealed secrets.
 */
export function startStreams(config: Config, db: Database, log: Logger, metrics: ServiceMetrics, releasers: Releasers): StreamRunner {
  const secretKey = requireSetting(config.secretEncryptionKey, 'SECRET_ENCRYPTION_KEY', 'the streams role');
  const runner = new StreamRunner({
    db,
    secrets: new SecretBox(secretKey),
    destinations: destinationOptions(config),
    pollMs: config.streams.pollMs,
    leaseMs: config.streams.leaseMs,
    capacity: config.streams.perProcess,
    failingRetryMs: config.streams.failingRetryMs,
    log,
    metrics,
  });
  runner.start();
  releasers.add('log streams', () => runner.stop());
  return runner;
}
