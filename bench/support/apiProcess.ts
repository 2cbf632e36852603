import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { BENCH_ENCRYPTION_KEY, BENCH_PEPPER, freePort, startNode, waitForHttp } from './processes.ts';

export interface ApiProcess {
  readonly child: ChildProcess;
  readonly baseUrl: string;
  readonly port: number;
}

/**
 * The api role in a process of its own, limits raised out of the way: the built CLI with the node flags of
 * the image's ENTRYPOINT (`node … dist/cli.js serve --roles api`; make bench builds first), or bench/support/apiServer.ts
 * over the same build when the limiter is to be left out. Running the TypeScript sources instead would
 * load Node's type stripper into the measured process (about 17 MB) and measure code the image does not ship.
 */
export async function startApiProcess(databaseUrl: string, options: { rateLimiting?: boolean; nodeOptions?: string } = {}): Promise<ApiProcess> {
  if (!existsSync('dist/cli.js')) throw new Error('dist/cli.js is missing: build first (make bench does)');
  const [port, internalPort] = [await freePort(), await freePort()];
  const entry = options.rateLimiting === false ? ['bench/support/apiServer.ts'] : ['dist/cli.js', 'serve', '--roles', 'api'];
  const child = startNode([...imageNodeFlags(), ...entry], {
    DATABASE_URL: databaseUrl,
    KEY_PEPPER: BENCH_PEPPER,
    SECRET_ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
    HOST: '127.0.0.1',
    PORT: String(port),
    INTERNAL_PORT: String(internalPort),
    LOG_LEVEL: 'warn',
    RATE_LIMIT_READ_PER_MINUTE: '100000000',
    RATE_LIMIT_WRITE_PER_MINUTE: '100000000',
    RATE_LIMIT_KEY_PREFIX: `bench:${randomBytes(4).toString('hex')}`,
    NODE_OPTIONS: options.nodeOptions ?? '',
  });
  await waitForHttp(`http://127.0.0.1:${internalPort}/readyz`);
  return { child, baseUrl: `http://127.0.0.1:${port}`, port };
}

/** The node flags of the image's ENTRYPOINT (Dockerfile), so that the measured process runs as the image runs it. */
function imageNodeFlags(): string[] {
  const line = readFileSync('Dockerfile', 'utf8').split('\n').find((text) => text.startsWith('ENTRYPOINT '));
  const entrypoint = JSON.parse(line!.slice('ENTRYPOINT '.length)) as string[];
  return entrypoint.slice(entrypoint.indexOf('node') + 1, entrypoint.indexOf('/app/dist/cli.js'));
}
