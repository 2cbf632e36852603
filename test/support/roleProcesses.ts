import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { freePort } from './ports.ts';
import { call } from './service.ts';
import { waitFor } from './wait.ts';

/**
 * Waits until a service process started on `internalPort` answers `readiness` with 200. A process of the
 * service loads its TypeScript at start, which on two cores busy with the rest of the suite can take well over
 * ten seconds: the wait is for readiness, not a bound anyone promised.
 */
export async function untilReady(
  internalPort: number,
  what = 'service ready',
  readiness: '/healthz' | '/readyz' = '/readyz',
): Promise<void> {
  await waitFor(
    async () => (await call(`http://127.0.0.1:${internalPort}${readiness}`).catch(() => ({ status: 0 }))).status === 200,
    what,
    30_000,
  );
}

/**
 * Roles of the service in processes of their own (`src/cli.ts serve --roles …`, as a pod runs them), for the
 * tests that kill one by its PID in the middle of its work. Each test file keeps one and calls killAll() in its
 * `after` hook, so that a failed test leaves no process behind.
 */
export class RoleProcesses {
  private readonly children = new Set<ChildProcess>();
  private readonly internalUrls = new Map<ChildProcess, string>();

  /** Starts `roles` with `env` over the test's own; resolves once the internal port answers `readiness` with 200. */
  async start(roles: readonly string[], env: Record<string, string>, readiness: '/healthz' | '/readyz' = '/readyz'): Promise<ChildProcess> {
    const internalPort = await freePort();
    const child = spawn(process.execPath, ['src/cli.ts', 'serve', '--roles', roles.join(',')], {
      env: {
        ...process.env,
        SHUTDOWN_DRAIN_DELAY_MS: '0',
        HOST: '127.0.0.1',
        INTERNAL_PORT: String(internalPort),
        LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'error',
        ...env,
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    this.children.add(child);
    this.internalUrls.set(child, `http://127.0.0.1:${internalPort}`);
    child.once('exit', () => this.children.delete(child));
    // A process that ends while starting fails the test at once, with its exit status, rather than after the
    // readiness wait with a timeout that hides why.
    const ended = once(child, 'exit').then(([code, signal]) => {
      throw new Error(`${roles.join(', ')} exited (${signal ?? `code ${code}`}) before it was ready`);
    });
    ended.catch(() => undefined);
    await Promise.race([untilReady(internalPort, `${roles.join(', ')} up`, readiness), ended]);
    return child;
  }

  /** The process's internal port (health, readiness, /metrics), as a URL. */
  internalUrl(child: ChildProcess): string {
    return this.internalUrls.get(child)!;
  }

  /** SIGKILL, as a lost node or the OOM killer ends a pod: no drain, no shutdown hook. Resolves once it exited. */
  async kill(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  /** The processes still running, in the order they were started. */
  running(): ChildProcess[] {
    return [...this.children];
  }

  killAll(): void {
    for (const child of this.children) child.kill('SIGKILL');
  }
}
