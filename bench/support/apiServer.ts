/**
 * The api role without the per-key limiter, the limiter-overhead benchmark's baseline; otherwise as
 * `audit-trail serve --roles api` runs it, from the same build (make bench builds first). The build is
 * imported by a path computed at run time so that type-checking does not need it to exist.
 */
type Config = typeof import('../../src/config/config.ts');
type Main = typeof import('../../src/main.ts');
type Logging = typeof import('../../src/platform/logger.ts');

const built = (path: string): Promise<unknown> => import(new URL(`../../dist/${path}`, import.meta.url).href);
const { loadConfig } = (await built('config/config.js')) as Config;
const { startService } = (await built('main.js')) as Main;
const { createLogger } = (await built('platform/logger.js')) as Logging;

const config = loadConfig();
const service = await startService({ config, roles: ['api'], log: createLogger(config.logLevel), rateLimiting: false });
process.on('SIGTERM', () => void service.stop().then(() => process.exit(0)));
