/**
 * The cost of a hung webhook endpoint (issue 16, item 2): CPU of the service's processes, of its Postgres and
 * of its NATS while one endpoint that accepts requests and never answers has 2,000, then 8,000 deliveries
 * pending, against the same processes idle in the same run. Goal: below 5 % of a core beyond idle for the
 * service and Postgres together, and no more with 8,000 than with 2,000.
 *
 *   node bench/hungEndpoint.ts        (make bench runs it too; BENCH_HUNG_SECONDS sets each window, 20 s)
 *
 * Postgres and NATS are private servers of this run (test/support/private-services.ts), so every process of
 * theirs is this service's and nothing else on the machine is counted: the postmaster and all its children
 * (backends, WAL writer, checkpointer, autovacuum). The service runs with production settings (concurrency
 * 16, a 10 s time limit, the 1 m, 5 m, … schedule), once as a relay and a worker process and once with both
 * roles in one process. Each window starts after the backlog has been published once and has settled.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { Database } from '../src/db/database.ts';
import { createDatabaseIfMissing, migrate } from '../src/db/migrate.ts';
import { EventWriter } from '../src/events/eventWriter.ts';
import { createLogger } from '../src/platform/logger.ts';
import { SecretBox } from '../src/webhooks/secretBox.ts';
import { WebhookRegistry } from '../src/webhooks/webhookRegistry.ts';
import { newEvent } from '../test/support/newEvents.ts';
import { PrivateNats, PrivatePostgres } from '../test/support/private-services.ts';
import {
  BENCH_ENCRYPTION_KEY,
  builtCli,
  cpuByPid,
  freePort,
  spawnReporting,
  startNode,
  stopProcess,
  waitForHttp,
} from './support/processes.ts';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';
import { ENDPOINT_DELIVERIES } from '../src/delivery/endpointDeliveries.ts';

const WINDOW_S = Number(process.env.BENCH_HUNG_SECONDS ?? 20);
const WARM_UP_MS = 15_000;
const SETTLE_MS = 5_000;
const BACKLOGS = [2_000, 8_000];
const log = createLogger('warn');

function childrenOf(pid: number): number[] {
  const result = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' });
  return result.stdout.split('\n').filter(Boolean).map(Number);
}

/**
 * CPU of groups of processes over a window, sampled every second: a process seen first during the window
 * (a new backend) counts from zero, one that ends during it keeps what it used until its last sample.
 */
async function measure(groups: Record<string, () => number[]>, seconds: number): Promise<Record<string, number>> {
  const first = new Map<string, Map<number, number>>();
  const last = new Map<string, Map<number, number>>();
  for (const [name, pids] of Object.entries(groups)) {
    first.set(name, cpuByPid(pids()));
    last.set(name, new Map(first.get(name)));
  }
  const started = Date.now();
  while (Date.now() - started < seconds * 1000) {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (const [name, pids] of Object.entries(groups)) for (const [pid, cpu] of cpuByPid(pids())) last.get(name)!.set(pid, cpu);
  }
  const elapsed = (Date.now() - started) / 1000;
  const percent: Record<string, number> = {};
  for (const name of Object.keys(groups)) {
    let used = 0;
    for (const [pid, cpu] of last.get(name)!) used += cpu - (first.get(name)!.get(pid) ?? 0);
    percent[name] = Number(((100 * used) / elapsed).toFixed(2));
  }
  return percent;
}

/** Sums every series of the named counters across the service's processes. */
async function counters(ports: number[]): Promise<Record<string, number>> {
  const names = {
    published: 'audit_webhook_relay_published_total',
    attempts: 'audit_webhook_delivery_attempts_total',
    parked: 'audit_webhook_deliveries_parked_total',
    deferred: 'audit_webhook_deliveries_deferred_total',
  };
  const totals: Record<string, number> = { published: 0, attempts: 0, parked: 0, deferred: 0 };
  for (const port of ports) {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const line of text.split('\n')) {
      for (const [key, name] of Object.entries(names)) {
        if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) totals[key]! += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
    }
  }
  return totals;
}

/** The delivery benchmark's receiver, in a process of its own; its /hang path accepts and never answers. */
async function startReceiverProcess(): Promise<{ child: ChildProcess; url: string }> {
  const { child, firstLine } = spawnReporting(['bench/webhookReceiver.ts']);
  return { child, url: `http://127.0.0.1:${((await firstLine) as { port: number }).port}` };
}

async function runLayout(postgres: PrivatePostgres, nats: PrivateNats, layout: 'separate' | 'combined', receiverUrl: string) {
  const databaseUrl = `${postgres.url}/audit_bench_hung_${layout}`;
  await createDatabaseIfMissing(databaseUrl);
  await migrate(databaseUrl, log);
  const db = new Database({ url: databaseUrl, poolSize: 2, applicationName: 'bench driver', log });
  const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
  const registry = new WebhookRegistry({
    db,
    writer,
    deliveries: ENDPOINT_DELIVERIES,
    secrets: new SecretBox(BENCH_ENCRYPTION_KEY),
    policy: { allowHttp: true, allowPrivateTargets: true },
  });
  // Filtered, so that its own admin.webhook.create event is not delivered to it during the idle window.
  const actor = { userId: 'bench', userRole: 'operator' };
  const { endpoint } = await registry.register('hung', { url: `${receiverUrl}/hang`, event_filter: ['phi.'] }, actor);

  const env = {
    DATABASE_URL: databaseUrl,
    NATS_URL: nats.url,
    NATS_NAMESPACE: `hung${layout}`,
    SECRET_ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'error',
  };
  const roles = layout === 'separate' ? ['relay', 'worker'] : ['relay,worker'];
  const services: Array<{ child: ChildProcess; port: number }> = [];
  for (const role of roles) {
    const port = await freePort();
    services.push({ child: startNode(builtCli('serve', '--roles', role), { ...env, INTERNAL_PORT: String(port) }), port });
  }
  for (const { port } of services) await waitForHttp(`http://127.0.0.1:${port}/readyz`);
  const ports = services.map((service) => service.port);
  const groups = {
    service: () => services.map((service) => service.child.pid!),
    postgres: () => [postgres.pid!, ...childrenOf(postgres.pid!)],
    nats: () => [nats.pid!],
  };

  const phase = async () => {
    const before = await counters(ports);
    const cpu = await measure(groups, WINDOW_S);
    const after = await counters(ports);
    const rate = (key: string) => Number(((after[key]! - before[key]!) / WINDOW_S).toFixed(2));
    return {
      cpu_pct_of_a_core: cpu,
      per_s: { published: rate('published'), attempts: rate('attempts'), parked: rate('parked'), deferred: rate('deferred') },
    };
  };

  // Past start-up (compilation, first connections). Idle is measured again at the end, in processes that
  // have run for minutes; the lower of the two, per group, is what a backlog is compared with: the first
  // window can still carry some of start-up's cost, the last one autovacuum's after the deletion.
  await new Promise((resolve) => setTimeout(resolve, WARM_UP_MS));
  const idleAtStart = await phase();
  const withBacklog: Record<string, Awaited<ReturnType<typeof phase>>> = {};
  let written = 0;
  for (const backlog of BACKLOGS) {
    while (written < backlog) {
      const size = Math.min(1_000, backlog - written);
      await writer.write(
        Array.from({ length: size }, () => newEvent({ tenantId: 'hung', details: '{"reason":"bench"}' })),
        'bench',
      );
      written += size;
    }
    // Published once at least (code that defers keeps publishing them: the window shows how often).
    for (;;) {
      if ((await counters(ports)).published! >= written) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    withBacklog[String(backlog)] = await phase();
  }
  const { rows } = await db.query<{ state: string; n: number }>(
    `SELECT state, count(*)::int AS n FROM deliveries GROUP BY state ORDER BY state`,
  );
  // Idle again: the endpoint deleted with its deliveries, its requests on the wire timed out and recorded.
  await registry.delete('hung', endpoint.id, actor);
  await new Promise((resolve) => setTimeout(resolve, WARM_UP_MS));
  const idleAtEnd = await phase();
  const idle = (name: string) => Math.min(idleAtStart.cpu_pct_of_a_core[name]!, idleAtEnd.cpu_pct_of_a_core[name]!);
  const beyondIdle = (measured: Awaited<ReturnType<typeof phase>>) => {
    const beyond = (name: string) => Number((measured.cpu_pct_of_a_core[name]! - idle(name)).toFixed(2));
    return {
      service: beyond('service'),
      postgres: beyond('postgres'),
      service_and_postgres: Number((beyond('service') + beyond('postgres')).toFixed(2)),
      nats: beyond('nats'),
    };
  };
  await db.close();
  for (const { child } of services) await stopProcess(child);
  return {
    layout: layout === 'separate' ? 'relay and worker in two processes' : 'relay and worker in one process',
    idle_at_start: idleAtStart,
    idle_at_end: idleAtEnd,
    backlog: Object.fromEntries(
      Object.entries(withBacklog).map(([backlog, measured]) => [backlog, { ...measured, beyond_idle_pct: beyondIdle(measured) }]),
    ),
    deliveries_with_8000_pending: Object.fromEntries(rows.map((row) => [row.state, row.n])),
  };
}

async function main(): Promise<void> {
  const [postgres, nats] = await Promise.all([PrivatePostgres.start(), PrivateNats.start()]);
  const { child: receiver, url: receiverUrl } = await startReceiverProcess();
  try {
    const layouts = [];
    for (const layout of ['separate', 'combined'] as const) layouts.push(await runLayout(postgres, nats, layout, receiverUrl));
    console.log(
      JSON.stringify(
        {
          benchmark: 'hung webhook endpoint',
          command: 'node bench/hungEndpoint.ts',
          window_s: WINDOW_S,
          layouts,
          goals: { service_and_postgres_beyond_idle_pct: '< 5', growth_2000_to_8000: 'none beyond noise' },
        },
        null,
        2,
      ),
    );
  } finally {
    receiver.kill('SIGTERM');
    await nats.remove();
    await postgres.remove();
  }
}

await main();
