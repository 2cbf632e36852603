/**
 * `make run` from an unchanged tree (issue 47): seconds from the command to its banner, the goal being 3 s,
 * next to a baseline measured in the same run: the service alone, `node dist/cli.js serve` with the same roles
 * and settings, from its start to its first ready /readyz (what `make run` cannot do without). The first run
 * (a new deployment: database, migrations, demo key and events) is printed apart, as `cold`.
 *
 *   node bench/makeRun.ts                     BENCH_MAKE_RUN_ROUNDS (default 5) warm starts
 *
 * It is a deployment of its own (RUN_LOCAL_DIR in a temporary directory, free ports), removed at the end with
 * scripts/clean-local.ts.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median } from '../test/support/statistics.ts';
import { freePort } from './support/processes.ts';

const ROUNDS = Number(process.env.BENCH_MAKE_RUN_ROUNDS ?? 5);
const ROLES = 'api,ingest,relay,worker,sealer,streams';
const stateDir = mkdtempSync(join(tmpdir(), 'audit-trail-bench-make-run-'));
const [port, internalPort] = [await freePort(), await freePort()];
const env = { ...process.env, RUN_LOCAL_DIR: stateDir, PORT: String(port), INTERNAL_PORT: String(internalPort) };

async function stop(child: ChildProcess): Promise<void> {
  const exited = once(child, 'exit');
  process.kill(-child.pid!, 'SIGINT');
  await exited;
}

/** Seconds from `make run` to the last line of its banner. */
async function makeRun(): Promise<number> {
  const begin = performance.now();
  const child = spawn('make', ['--no-print-directory', 'run'], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const banner = new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Stop with Ctrl-C')) resolve((performance.now() - begin) / 1000);
    });
    child.on('exit', (code) => reject(new Error(`make run exited (${code}) before its banner:\n${output}`)));
  });
  try {
    return await banner;
  } finally {
    await stop(child);
  }
}

/** Seconds from starting the service alone to its first ready answer. */
async function serveAlone(): Promise<number> {
  const settings = Object.fromEntries(
    readFileSync(join(stateDir, 'dev.env'), 'utf8')
      .split('\n')
      .filter((line) => line.includes('='))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1).replace(/^'(.*)'$/, '$1')]),
  );
  const begin = performance.now();
  const child = spawn(join('node_modules', '.bin', 'node'), ['dist/cli.js', 'serve', '--roles', ROLES], {
    env: { ...process.env, ...settings, PORT: String(port), INTERNAL_PORT: String(internalPort), SHUTDOWN_DRAIN_DELAY_MS: '0' },
    detached: true,
    stdio: 'ignore',
  });
  try {
    for (;;) {
      const ready = await fetch(`http://127.0.0.1:${internalPort}/readyz`).then(
        (response) => response.ok,
        () => false,
      );
      if (ready) return (performance.now() - begin) / 1000;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await stop(child);
  }
}

try {
  const cold = await makeRun();
  const warm: number[] = [];
  const alone: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    warm.push(await makeRun());
    alone.push(await serveAlone());
  }
  const seconds = (value: number) => Number(value.toFixed(2));
  console.log(
    JSON.stringify({
      rounds: ROUNDS,
      cold_s: seconds(cold),
      warm_to_banner_s: { median: seconds(median(warm)), max: seconds(Math.max(...warm)) },
      baseline_serve_to_ready_s: { median: seconds(median(alone)), max: seconds(Math.max(...alone)) },
      ratio_warm_to_baseline_median: Number((median(warm) / median(alone)).toFixed(2)),
      goal_s: 3,
      within_goal: median(warm) <= 3,
    }),
  );
} finally {
  spawnSync(join('node_modules', '.bin', 'node'), ['scripts/clean-local.ts', stateDir], { stdio: 'inherit' });
}
