/**
 * The api role for the benchmarks, as `audit-trail serve --roles api` runs it, except that
 * BENCH_RATE_LIMITING=off leaves out the per-key limiter (the limiter-overhead benchmark's baseline).
 * Configuration comes from the environment like the real service's.
 */
import { loadConfig } from '../../src/config/config.ts';
import { startService } from '../../src/main.ts';
import { createLogger } from '../../src/platform/logger.ts';

const config = loadConfig();
const service = await startService({
  config,
  roles: ['api'],
  log: createLogger(config.logLevel),
  rateLimiting: process.env.BENCH_RATE_LIMITING !== 'off',
});
process.on('SIGTERM', () => void service.stop().then(() => process.exit(0)));
