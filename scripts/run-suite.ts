// `make test`: the whole suite in two phases, then the one closing line CI reads, "N passed, M failed".
//
// Most of the suite's wall time is waiting (for a fault to last, a retry to come due, a process to start): one
// mocha process used about a third of a core across 15 minutes. So most files run in parallel mocha workers,
// each file in one worker with its own database, JetStream namespace and rate-limit prefix, as two clones'
// suites already run side by side. Two kinds of file run first, alone, one after another:
// - those that rebuild this clone's own outputs (dist/, packages/client/dist) while they run: a CLI test beside
//   them would start a half-written file;
// - those whose assertions are latencies: beside other files they would measure the neighbours.
//
// Usage: node scripts/run-suite.ts [--jobs N]   (TEST_JOBS works too; default 3)
import { spawn } from 'node:child_process';
import { existsSync, globSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const RUN_ALONE = [
  // They write into the clone's build outputs as they run (make run builds; npm pack runs prepack; tsc).
  'test/docs/make-run.test.ts',
  'test/chart/dockerfile.test.ts',
  'test/client/package.test.ts',
  // They assert latencies: a healthy endpoint's p99 beside a hung one; 401 times of known and unknown keys; a
  // retry's start against its due time.
  'test/resilience/hung-endpoint.test.ts',
  'test/auth/timing.test.ts',
  'test/webhooks/retry-on-time.test.ts',
];

/**
 * The long files go first, so that no worker starts a two-minute file when the rest are nearly done. Each file
 * is named once, where it first matches (mocha's parallel mode runs a file named twice twice).
 */
const LONGEST_FIRST = ['test/resilience/**/*.test.ts', 'test/docs/**/*.test.ts', 'test/controller/**/*.test.ts', 'test/**/*.test.ts'];

interface Counts {
  passes: number;
  failures: number;
  pending: number;
}

function jobsFromArguments(): number {
  const flag = process.argv.indexOf('--jobs');
  const value = flag >= 0 ? process.argv[flag + 1] : process.env.TEST_JOBS;
  const jobs = value === undefined ? 3 : Number(value);
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error(`--jobs (or TEST_JOBS) must be a positive integer, not ${value}`);
  return jobs;
}

/**
 * Runs mocha with the project's configuration, each file in a worker process of its own: the summary reporter
 * writes its counts to a file instead of printing them, and test/support/file-timings.cjs each file's wall time.
 */
function runMocha(jobs: number, files: string[], summaryFile: string): Promise<Counts> {
  const args = ['--parallel', '--jobs', String(jobs), '--require', 'test/support/file-timings.cjs', ...files];
  return new Promise((resolve, reject) => {
    const child = spawn('mocha', args, {
      stdio: 'inherit',
      env: { ...process.env, TEST_SUMMARY_FILE: summaryFile, TEST_TIMINGS_FILE: timingsFile },
    });
    child.once('error', reject);
    child.once('exit', () => {
      try {
        resolve(JSON.parse(readFileSync(summaryFile, 'utf8')) as Counts);
      } catch {
        // mocha ended before its reporter did (a crash while loading a file): count that as a failure, never as a pass.
        resolve({ passes: 0, failures: 1, pending: 0 });
      }
    });
  });
}

/** The slowest files of the run, so that whoever makes the suite faster knows where its time goes. */
function slowestFiles(count: number): string {
  const timings = existsSync(timingsFile)
    ? readFileSync(timingsFile, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { file: string; seconds: number })
    : [];
  const total = timings.reduce((sum, timing) => sum + timing.seconds, 0);
  const slowest = timings.sort((a, b) => b.seconds - a.seconds).slice(0, count);
  return [
    `\nTest files: ${timings.length}, ${Math.round(total)} s in all; the slowest:`,
    ...slowest.map((timing) => `  ${timing.seconds.toFixed(1).padStart(6)} s  ${timing.file}`),
  ].join('\n');
}

const scratch = mkdtempSync(join(tmpdir(), 'audit-trail-suite-'));
const timingsFile = join(scratch, 'timings.ndjson');
try {
  const jobs = jobsFromArguments();
  const serial = await runMocha(1, RUN_ALONE, join(scratch, 'serial.json'));
  const files = [...new Set(LONGEST_FIRST.flatMap((pattern) => globSync(pattern).sort()))].filter((file) => !RUN_ALONE.includes(file));
  const parallel = await runMocha(jobs, files, join(scratch, 'parallel.json'));
  const passes = serial.passes + parallel.passes;
  const failures = serial.failures + parallel.failures;
  const pending = serial.pending + parallel.pending;
  process.stdout.write(`${slowestFiles(12)}\n`);
  process.stdout.write(`\n${passes} passed, ${failures} failed${pending > 0 ? `, ${pending} skipped` : ''}\n`);
  process.exitCode = failures > 0 ? 1 : 0;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
