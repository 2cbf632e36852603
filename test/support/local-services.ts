import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { waitFor } from './wait.ts';

const run = promisify(execFile);

/**
 * Stops and starts the machine's real Postgres and NATS, for tests of how the service rides out an outage.
 * Same commands as scripts/services.sh. Only for test files that own the machine while they run.
 */

function postgresVersion(): string {
  return readdirSync('/etc/postgresql').sort((a, b) => Number(a) - Number(b)).at(-1)!;
}

async function portOpen(port: number): Promise<boolean> {
  const { createConnection } = await import('node:net');
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export async function stopPostgres(): Promise<void> {
  await run('pg_ctlcluster', ['--skip-systemctl-redirect', postgresVersion(), 'main', 'stop', '-m', 'fast']);
  await waitFor(async () => !(await portOpen(5432)), 'Postgres to stop');
}

export async function startPostgres(): Promise<void> {
  if (await portOpen(5432)) return;
  await run('pg_ctlcluster', ['--skip-systemctl-redirect', postgresVersion(), 'main', 'start']);
  await waitFor(() => portOpen(5432), 'Postgres to accept connections', 30_000);
}

export async function stopNats(): Promise<void> {
  await run('start-stop-daemon', ['--stop', '--oknodo', '--retry', '10', '--exec', '/usr/sbin/nats-server']);
  await waitFor(async () => !(await portOpen(4222)), 'NATS to stop');
}

export async function startNats(): Promise<void> {
  if (await portOpen(4222)) return;
  await run('start-stop-daemon', [
    '--start', '--oknodo', '--background', '--exec', '/usr/sbin/nats-server', '--',
    '-a', '127.0.0.1', '-p', '4222', '-js', '-sd', '/var/lib/nats-server', '-l', '/var/log/nats-server.log',
  ]);
  await waitFor(() => portOpen(4222), 'NATS to accept connections', 30_000);
}

export async function stopRedis(): Promise<void> {
  await run('redis-cli', ['-h', '127.0.0.1', '-p', '6379', 'shutdown', 'nosave']).catch(() => undefined);
  await waitFor(async () => !(await portOpen(6379)), 'Redis to stop');
}

export async function startRedis(): Promise<void> {
  if (await portOpen(6379)) return;
  await run('redis-server', [
    '--daemonize', 'yes', '--bind', '127.0.0.1', '-::1', '--port', '6379', '--save', '', '--appendonly', 'no',
    '--dir', '/var/lib/redis', '--logfile', '/var/log/redis/audit-trail.log',
  ]);
  await waitFor(() => portOpen(6379), 'Redis to accept connections', 30_000);
}
