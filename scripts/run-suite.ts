// `make test`: the whole suite in two phases, then the one closing line CI reads, "N passed, M failed".
//
// Most of the suite's wall time is waiting (for a fault to last, a retry to come due, a process to start): one
// mocha process used about a third of a core across 15 minutes. So most files run in parallel mocha workers,
// each file in one worker with its own database, JetStream namespace and rate-limit prefix, as two clones'
// suites already run side by side. The tests whose assertions are latencies (LATENCY_TAG in their titles) run
// first, each file's alone, one after another. No file writes the clone's build outputs (dist/,
// packages/client/dist): those that pack or run the build use the one make test made
// (test/support/builtOutputs.ts), since a rebuild beside a CLI test would hand it a half-written file.
//
// Usage: node scripts/run-suite.ts [--jobs N]   (TEST_JOBS works too; default 3). TEST_TIMINGS_FILE=path keeps
// each file's time there, a line of JSON each.
import { spawn } from 'node:child_process';
import { existsSync, globSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Marks a test whose assertion is a latency (a p99, an answer within a second or two, a retry on its due
 * time): beside other files it would measure the neighbours. Such tests run first, each file's alone, with
 * their file's hooks; the rest of the file runs in the parallel phase.
 */
const LATENCY_TAG = '@latency';

/**
 * The long files go first, so that no worker starts a two-minute file when the rest are nearly done (the fault
 * scenarios, make run, the browser, the broker's crash, the CLI and the chart each take 30 s to 3 minutes).
 * Each file is named once, where it first matches (mocha's parallel mode runs a file named twice twice).
 */
const LONGEST_FIRST = [
  'test/resilience/**/*.test.ts',
  'test/docs/**/*.test.ts',
  'test/portal/*.browser.test.ts',
  'test/streams/amqp-destination.test.ts',
  'test/client/*.test.ts',
  'test/chart/**/*.test.ts',
  'test/controller/**/*.test.ts',
  'test/webhooks/idle-relay.test.ts',
  'test/**/*.test.ts',
];

interface Failure {
  title: string;
  file?: string;
  /** The first lines of its message (test/support/summary-reporter.cjs). */
  message: string[];
}

interface Counts {
  passes: number;
  failures: number;
  pending: number;
  failed: Failure[];
}

function jobsFromArguments(): number {
  const flag = process.argv.indexOf('--jobs');
  const value = flag >= 0 ? process.argv[flag + 1] : process.env.TEST_JOBS;
  const jobs = value === undefined ? 3 : Number(value);
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error(`--jobs (or TEST_JOBS) must be a positive integer, not ${value}`);
  return jobs;
}

/**
 * Runs mocha with the project's configuration: the summary reporter writes its counts to a file instead of
 * printing them, and test/support/file-timings.cjs each file's wall time. Its root hooks run once per file only
 * in parallel mode (a worker per file) or for a mocha of one file, so the latency tests' files get one each.
 */
function runMocha(jobs: number, files: string[], grep: string[], summaryFile: string): Promise<Counts> {
  const parallel = jobs > 1 ? ['--parallel', '--jobs', String(jobs)] : [];
  const args = [...parallel, ...grep, '--require', 'test/support/file-timings.cjs', ...files];
  return new Promise((resolve, reject) => {
    const child = spawn('mocha', args, {
      stdio: 'inherit',
      env: { ...process.env, NODE_COMPILE_CACHE: compileCache, TEST_SUMMARY_FILE: summaryFile, TEST_TIMINGS_FILE: timingsFile },
    });
    child.once('error', reject);
    child.once('exit', () => {
      try {
        resolve(JSON.parse(readFileSync(summaryFile, 'utf8')) as Counts);
      } catch {
        // mocha ended before its reporter did (a crash while loading a file): count that as a failure, never as a pass.
        resolve({
          passes: 0,
          failures: 1,
          pending: 0,
          failed: [{ title: `mocha ended before its reporter (${files.join(', ')})`, message: [] }],
        });
      }
    });
  });
}

interface FileTiming {
  file: string;
  seconds: number;
  /** The longest the file's process kept its event loop from turning (test/support/file-timings.cjs). */
  longestLoopDelayMs?: number;
}

function fileTimings(): FileTiming[] {
  if (!existsSync(timingsFile)) return [];
  return readFileSync(timingsFile, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as FileTiming);
}

/** The slowest files of the run, so that whoever makes the suite faster knows where its time goes. */
function slowestFiles(timings: FileTiming[], count: number): string {
  const total = timings.reduce((sum, timing) => sum + timing.seconds, 0);
  const slowest = [...timings].sort((a, b) => b.seconds - a.seconds).slice(0, count);
  return [
    `\nTest files: ${timings.length}, ${Math.round(total)} s in all; the slowest:`,
    ...slowest.map((timing) => `  ${timing.seconds.toFixed(1).padStart(6)} s  ${timing.file}`),
  ].join('\n');
}

/**
 * A file whose process kept its event loop from turning this long starved whatever it runs in-process (most
 * files run the service so): its waits then measure the test's own computing. Named so that it is mended
 * before it fails a run; GC pauses and process starts on a busy machine stay well under it.
 */
const LOOP_DELAY_WORTH_NAMING_MS = 2_000;

function blockedFiles(timings: FileTiming[]): string {
  const blocked = timings
    .filter((timing) => (timing.longestLoopDelayMs ?? 0) >= LOOP_DELAY_WORTH_NAMING_MS)
    .sort((a, b) => b.longestLoopDelayMs! - a.longestLoopDelayMs!);
  if (blocked.length === 0) return '';
  return [
    `\nEvent loop held for ${LOOP_DELAY_WORTH_NAMING_MS / 1000} s or more at a time (a file that runs the service in-process starves it so):`,
    ...blocked.map((timing) => `  ${(timing.longestLoopDelayMs! / 1000).toFixed(1).padStart(6)} s  ${timing.file}`),
  ].join('\n');
}

/**
 * Each failure again, compactly, just above the closing line: CI's record of a run keeps only the end of its
 * output, far below mocha's own account of the failures.
 */
function failureList(failed: Failure[]): string {
  if (failed.length === 0) return '';
  const entries = failed.map((failure) =>
    [
      `  ${failure.title}${failure.file ? ` (${failure.file.replace(`${process.cwd()}/`, '')})` : ''}`,
      ...failure.message.map((line) => `      ${line}`),
    ].join('\n'),
  );
  return `\nFailed:\n${entries.join('\n')}\n`;
}

/**
 * Node's compile cache for every process of the run (mocha's workers, the roles and CLIs the tests start):
 * the suite starts some 250 Node processes of the same sources, and each spent about 0.4 s of CPU stripping
 * the TypeScript and compiling it again, on a machine the suite keeps busy. It lives with the clone's
 * dependencies, so that a fresh clone starts without one; entries are keyed by each file's content.
 */
const compileCache = process.env.NODE_COMPILE_CACHE ?? join(import.meta.dirname, '..', 'node_modules', '.cache', 'node-compile-cache');

const scratch = mkdtempSync(join(tmpdir(), 'audit-trail-suite-'));
// Where each file's time goes: the caller's TEST_TIMINGS_FILE, kept for a closer look, or one of the run's own.
const timingsFile = process.env.TEST_TIMINGS_FILE ?? join(scratch, 'timings.ndjson');
try {
  const jobs = jobsFromArguments();
  const files = [...new Set(LONGEST_FIRST.flatMap((pattern) => globSync(pattern).sort()))];
  const runs: Counts[] = [];
  for (const file of files.filter((name) => readFileSync(name, 'utf8').includes(LATENCY_TAG)))
    runs.push(await runMocha(1, [file], ['--grep', LATENCY_TAG], join(scratch, `alone-${runs.length}.json`)));
  runs.push(await runMocha(jobs, files, ['--grep', LATENCY_TAG, '--invert'], join(scratch, 'parallel.json')));
  const passes = runs.reduce((sum, run) => sum + run.passes, 0);
  const failures = runs.reduce((sum, run) => sum + run.failures, 0);
  const pending = runs.reduce((sum, run) => sum + run.pending, 0);
  const timings = fileTimings();
  process.stdout.write(`${slowestFiles(timings, 12)}\n`);
  const blocked = blockedFiles(timings);
  if (blocked !== '') process.stdout.write(`${blocked}\n`);
  process.stdout.write(failureList(runs.flatMap((run) => run.failed)));
  process.stdout.write(`\n${passes} passed, ${failures} failed${pending > 0 ? `, ${pending} skipped` : ''}\n`);
  process.exitCode = failures > 0 ? 1 : 0;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
