/** Child processes of the benchmarks: the service or a baseline, each on its own CPU thread. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { createDatabaseIfMissing, migrate } from '../../src/db/migrate.ts';
import type { Logger } from '../../src/platform/logger.ts';

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** The node flags of the image's ENTRYPOINT (Dockerfile), so that measured processes run as the image runs them. */
export function imageNodeFlags(): string[] {
  const line = readFileSync('Dockerfile', 'utf8')
    .split('\n')
    .find((text) => text.startsWith('ENTRYPOINT '));
  const entrypoint = JSON.parse(line!.slice('ENTRYPOINT '.length)) as string[];
  return entrypoint.slice(entrypoint.indexOf('node') + 1, entrypoint.indexOf('/app/dist/cli.js'));
}

/**
 * Arguments that run the built CLI as the image does (make bench builds first). The TypeScript sources
 * would load Node's type stripper into the measured process and run code the image does not ship.
 */
export function builtCli(...args: string[]): string[] {
  if (!existsSync('dist/cli.js')) throw new Error('dist/cli.js is missing: build first (make bench does)');
  return [...imageNodeFlags(), 'dist/cli.js', ...args];
}

export function startNode(args: string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit'] });
  children.add(child);
  child.on('exit', () => children.delete(child));
  return child;
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

export { freePort } from '../../test/support/ports.ts';

export async function waitForHttp(url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await fetch(url).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

/** Resident set size of a process, in MB (Linux). */
export function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : NaN;
}

/** Samples a process's RSS every 100 ms until stopped; returns the peak. */
export function sampleRss(pid: number): { stop(): number } {
  let peak = rssMb(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssMb(pid));
    } catch {
      // The process ended.
    }
  }, 100);
  return {
    stop() {
      clearInterval(timer);
      return peak;
    },
  };
}

export const BENCH_PEPPER = 'bench-pepper-0123456789abcdef0123456789abcdef';
export const BENCH_ENCRYPTION_KEY = 'ab'.repeat(32);
export const BENCH_INGEST_TOKEN = 'bench-ingest-token-0123456789abcdef';

/** CPU seconds (user + system) used so far by each of the given processes; ended ones are absent. */
export function cpuByPid(pids: Iterable<number>): Map<number, number> {
  const seconds = new Map<number, number>();
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      seconds.set(pid, (Number(fields[11]) + Number(fields[12])) / 100); // USER_HZ is 100 on Linux
    } catch {
      // Gone.
    }
  }
  return seconds;
}

/**
 * CPU seconds a changing set of processes (a user's) spends from now until `elapsed()`. Counted per
 * process: one that exits meanwhile (an autovacuum worker, a closed connection's backend) would otherwise
 * take all the time it ever used out of the sum, and one that starts counts from zero.
 */
export function cpuMeter(pids: () => readonly number[]): { elapsed(): number } {
  const before = cpuByPid(pids());
  return {
    elapsed() {
      let seconds = 0;
      for (const [pid, now] of cpuByPid(pids())) seconds += now - (before.get(pid) ?? 0);
      return seconds;
    },
  };
}

/** This process's own CPU seconds since the meter was made, in the shape of cpuMeter's. */
export function processCpuMeter(): { elapsed(): number } {
  const before = process.cpuUsage();
  return {
    elapsed() {
      const { user, system } = process.cpuUsage(before);
      return (user + system) / 1e6;
    },
  };
}

/** Every process of a Unix user (Postgres backends are created per connection, so list them anew). */
export function pidsOfUser(user: string): number[] {
  const result = spawnSync('pgrep', ['-u', user], { encoding: 'utf8' });
  return result.stdout.split('\n').filter(Boolean).map(Number);
}

/**
 * The backends of a local Postgres server connected to one database (by psql: meters ask synchronously),
 * or only those whose application_name starts with one of `applications` (the service names its sessions
 * after its roles: `audit-trail worker`, `audit-trail delivery-relay`, ...).
 */
export function backendsOf(serverUrl: string, database: string, applications: readonly string[] = ['']): number[] {
  const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;
  const named = applications.map((prefix) => `starts_with(application_name, ${literal(prefix)})`).join(' OR ');
  const sql = `SELECT pid FROM pg_stat_activity WHERE datname = ${literal(database)} AND (${named})`;
  const result = spawnSync('psql', ['-d', `${serverUrl}/postgres`, '-Atc', sql], { encoding: 'utf8' });
  return result.stdout.split('\n').filter(Boolean).map(Number);
}

/** Processes whose name is exactly `name` (nats-server, redis-server). */
export function pidsOfName(name: string): number[] {
  const result = spawnSync('pgrep', ['-x', name], { encoding: 'utf8' });
  return result.stdout.split('\n').filter(Boolean).map(Number);
}

/**
 * A child whose stdout is read to the end, its first line (a JSON report: a receiver's port, a baseline's
 * figures) kept. A service's log lines that nobody read would fill the pipe, and pino's synchronous writes
 * then block the process: mid-measurement, or for ever at shutdown once the driver stopped reading.
 */
export interface ReportingChild {
  readonly child: ChildProcess;
  readonly firstLine: Promise<any>;
}

export function spawnReporting(args: string[], env: Record<string, string> = {}): ReportingChild {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  const firstLine = once(lines, 'line').then(([line]) => JSON.parse(line as string));
  // A child that dies before its first line rejects it; unobserved for children nobody asks.
  firstLine.catch(() => undefined);
  return { child, firstLine };
}

/** Waits for a service's /readyz to answer 200. */
export async function waitReady(port: number): Promise<void> {
  for (let tries = 0; tries < 200; tries += 1) {
    const status = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`service on ${port} never became ready`);
}

/** The p-th percentile of ascending values. */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** Drops and creates a benchmark's database, migrated: every run starts from empty tables. */
export async function freshDatabase(server: string, name: string, log: Logger): Promise<void> {
  const admin = new pg.Client({ connectionString: `${server}/postgres` });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
  await createDatabaseIfMissing(`${server}/${name}`);
  await migrate(`${server}/${name}`, log);
}
