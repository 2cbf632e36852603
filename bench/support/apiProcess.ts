import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { BENCH_ENCRYPTION_KEY, BENCH_PEPPER, builtCli, freePort, imageNodeFlags, startNode, waitForHttp } from './processes.ts';

export interface ApiProcess {
  readonly child: ChildProcess;
  readonly baseUrl: string;
  readonly port: number;
  /** Metrics and health (INTERNAL_PORT). */
  readonly internalUrl: string;
}

/**
 * The api role in a process of its own, limits raised out of the way: the built CLI as the image runs it
 * (builtCli), or bench/support/apiServer.ts over the same build when the limiter is to be left out.
 */
export async function startApiProcess(
  databaseUrl: string,
  options: { rateLimiting?: boolean; nodeOptions?: string; port?: number; env?: Record<string, string> } = {},
): Promise<ApiProcess> {
  const [port, internalPort] = [options.port ?? (await freePort()), await freePort()];
  const child = startNode(
    options.rateLimiting === false ? [...imageNodeFlags(), 'bench/support/apiServer.ts'] : builtCli('serve', '--roles', 'api'),
    {
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
      ...options.env,
    },
  );
  await waitForHttp(`http://127.0.0.1:${internalPort}/readyz`);
  return { child, baseUrl: `http://127.0.0.1:${port}`, port, internalUrl: `http://127.0.0.1:${internalPort}` };
}
