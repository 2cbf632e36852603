/**
 * An idle deployment (issue 42): every role in one process (`serve` without --roles, so all but the
 * controller), nothing to do, measured from outside over a window: Postgres transactions per second of its
 * database (pg_stat_database, read from another database so the reading is not counted), its CPU share of
 * one core and its wakeups (context switches of all its threads) per second, from /proc. Beside it, the
 * same for the code before issue 42 (BENCH_IDLE_BASELINE, a commit: its tree is extracted and run the same
 * way), measured in the same run.
 *
 *   node bench/idle.ts                BENCH_IDLE_SECONDS (default 60) per variant, after 10 s to settle
 *
 * Both variants run from their TypeScript sources (the baseline has no dist/ of its own); past start-up,
 * type stripping costs nothing. Each gets a fresh database and NATS namespace, removed afterwards.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { createLogger } from '../src/platform/logger.ts';
import { removeNamespaceStreams } from '../test/support/natsNamespaces.ts';
import { SERVER_URL } from './support/listDataset.ts';
import {
  BENCH_ENCRYPTION_KEY,
  BENCH_INGEST_TOKEN,
  BENCH_PEPPER,
  cpuByPid,
  freePort,
  freshDatabase,
  waitReady,
} from './support/processes.ts';

const SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 60);
const SETTLE_MS = 10_000;
/** The commit before issue 42's changes: the code whose idle cost the issue measured. */
const BASELINE = process.env.BENCH_IDLE_BASELINE ?? '8a7dab1b2fd182b23a14121f33d4d593e4049088';
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const log = createLogger('silent');

interface IdleFigures {
  readonly transactionsPerSecond: number;
  readonly corePercent: number;
  readonly wakeupsPerSecond: number;
}

/** Transactions committed and rolled back in `database` so far (flushed by backends within about 10 s). */
async function transactions(admin: pg.Client, database: string): Promise<number> {
  const { rows } = await admin.query<{ n: string }>(
    'SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1',
    [database],
  );
  return Number(rows[0]?.n ?? 0);
}

/** Context switches of every thread of a process: each is a wakeup (or a preemption) of one of them. */
function contextSwitches(pid: number): number {
  let switches = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8');
      for (const match of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm)) switches += Number(match[1]);
    } catch {
      // The thread ended.
    }
  }
  return switches;
}

async function measure(name: string, directory: string): Promise<IdleFigures> {
  const database = `audit_bench_idle_${name}`;
  await freshDatabase(SERVER_URL, database, log);
  const namespace = `idle${randomBytes(3).toString('hex')}`;
  const internalPort = await freePort();
  const child: ChildProcess = spawn(process.execPath, ['src/cli.ts', 'serve'], {
    cwd: directory,
    env: {
      ...process.env,
      DATABASE_URL: `${SERVER_URL}/${database}`,
      NATS_URL,
      NATS_NAMESPACE: namespace,
      KEY_PEPPER: BENCH_PEPPER,
      SECRET_ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
      INGEST_TOKENS: BENCH_INGEST_TOKEN,
      SEAL_SIGNING_KEY: generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      PORT: String(await freePort()),
      INTERNAL_PORT: String(internalPort),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'error',
      KUBERNETES_SERVICE_HOST: '',
      KUBECONFIG: '',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
  await admin.connect();
  try {
    await waitReady(internalPort);
    await new Promise((done) => setTimeout(done, SETTLE_MS));
    const pid = child.pid!;
    const before = {
      xacts: await transactions(admin, database),
      cpu: cpuByPid([pid]).get(pid)!,
      switches: contextSwitches(pid),
      at: performance.now(),
    };
    await new Promise((done) => setTimeout(done, SECONDS * 1000));
    // Idle backends flush their statistics within 10 s (PGSTAT_IDLE_INTERVAL): wait for the window's last ones.
    const after = { cpu: cpuByPid([pid]).get(pid)!, switches: contextSwitches(pid), at: performance.now() };
    await new Promise((done) => setTimeout(done, 11_000));
    // What the settling wait let in after the window, at the window's rate, is taken out again.
    const counted = (await transactions(admin, database)) - before.xacts;
    const seconds = (after.at - before.at) / 1000;
    const transactionsPerSecond = counted / (seconds + 11);
    return {
      transactionsPerSecond,
      corePercent: ((after.cpu - before.cpu) / seconds) * 100,
      wakeupsPerSecond: (after.switches - before.switches) / seconds,
    };
  } finally {
    child.kill('SIGTERM');
    await once(child, 'exit');
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
    await removeNamespaceStreams(NATS_URL, namespace);
  }
}

/** The baseline commit's tree in a temporary directory, with this checkout's node_modules. */
function extractBaseline(): string {
  const directory = mkdtempSync(join(tmpdir(), 'audit-trail-bench-idle-'));
  const archive = spawnSync('sh', ['-c', `git archive ${BASELINE} | tar -x -C ${directory}`], { stdio: 'inherit' });
  if (archive.status !== 0) throw new Error(`could not extract ${BASELINE}`);
  symlinkSync(resolve('node_modules'), join(directory, 'node_modules'));
  return directory;
}

const format = (figures: IdleFigures) =>
  `${figures.transactionsPerSecond.toFixed(2)} Postgres transactions/s, ${figures.corePercent.toFixed(2)} % of a core, ${figures.wakeupsPerSecond.toFixed(0)} wakeups/s`;

const baselineDirectory = extractBaseline();
try {
  console.log(`idle, every role but the controller in one process, ${SECONDS} s each (machine shared):`);
  const baseline = await measure('baseline', baselineDirectory);
  console.log(`  before issue 42 (${BASELINE.slice(0, 7)}): ${format(baseline)}`);
  const current = await measure('current', process.cwd());
  console.log(`  this tree:                ${format(current)}`);
  console.log(
    `  ratio (this / before): transactions ${(current.transactionsPerSecond / baseline.transactionsPerSecond).toFixed(3)}, CPU ${(current.corePercent / baseline.corePercent).toFixed(3)}, wakeups ${(current.wakeupsPerSecond / baseline.wakeupsPerSecond).toFixed(3)}`,
  );
} finally {
  rmSync(baselineDirectory, { recursive: true, force: true });
}
