/**
 * List benchmark (issue 2): GET /audit/events?limit=100 over 2,000,000 events of 1,000 tenants (one holding
 * 500,000), random tenants, some with a filter, some with a cursor, 64 connections — against a bare
 * node:http + pg server selecting the same page's columns and serialising them with JSON.stringify
 * (bench/baseline/bareListServer.ts), in the same run. Also: p50/p99 at half the peak (evenly spaced
 * arrivals), the api's peak RSS beside the bare server's, and a 0.5 % filter on the big tenant vs its unfiltered page.
 *
 *   node bench/list.ts
 */
import { ApiKeyService } from '../src/auth/apiKeyService.ts';
import { Database } from '../src/db/database.ts';
import { EventWriter } from '../src/events/eventWriter.ts';
import { createLogger } from '../src/platform/logger.ts';
import {
  BIG_TENANT,
  LIST_DATABASE_URL,
  RARE_ACTION,
  SERVER_URL,
  TENANTS,
  ensureListDataset,
  ensureReferenceEvents,
} from './support/listDataset.ts';
import { pacedLoad, runLoad, sequentialLatency } from './support/load.ts';
import { startApiProcess } from './support/apiProcess.ts';
import {
  BENCH_PEPPER,
  backendsOf,
  cpuMeter,
  freePort,
  pidsOfName,
  sampleRss,
  startNode,
  stopProcess,
  waitForHttp,
} from './support/processes.ts';
import { WEBHOOK_FAN_OUT } from '../src/delivery/fanOut.ts';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const CONNECTIONS = 64;
const SAMPLE_TENANTS = 100;

const log = (line: string) => console.error(line);
await ensureListDataset(log);
await ensureReferenceEvents(log);

// Tenants and their keys: the big one plus a random sample of the others.
const tenants = [
  BIG_TENANT,
  ...Array.from({ length: SAMPLE_TENANTS - 1 }, (_, index) => `tenant-${String((index * 10 + 3) % (TENANTS - 1)).padStart(4, '0')}`),
];
const db = new Database({ url: LIST_DATABASE_URL, poolSize: 2, applicationName: 'bench keys', log: createLogger('warn') });
const keyService = new ApiKeyService({ db, writer: new EventWriter(db, WEBHOOK_FAN_OUT), pepper: BENCH_PEPPER, environment: 'live' });
const keys = new Map<string, string>();
for (const tenant of tenants)
  keys.set(tenant, (await keyService.mint({ tenantId: tenant, scopes: ['audit:read'] }, { userId: 'bench', userRole: 'operator' })).key);
await db.close();

const barePort = await freePort();
const { child: api, port: apiPort } = await startApiProcess(LIST_DATABASE_URL, { nodeOptions: process.env.BENCH_API_NODE_OPTIONS });
// The bare server reads the same events from a table holding each field once as a column (issue 30's reference).
const bare = startNode(['bench/baseline/bareListServer.ts'], {
  DATABASE_URL: LIST_DATABASE_URL,
  PORT: String(barePort),
  BARE_LIST_TABLE: 'reference_events',
  // For a profile of the baseline beside the api's (BENCH_API_NODE_OPTIONS).
  NODE_OPTIONS: process.env.BENCH_BARE_NODE_OPTIONS ?? '',
});
await waitForHttp(`http://127.0.0.1:${barePort}/events?tenant=${BIG_TENANT}&limit=1`);

// Request mix: 60 % plain, 25 % with a filter, 15 % the second page through a cursor.
// The old filters and issue 30's: one of the dataset's 5,000 users, or one of its 100,000 claims.
const FILTERS = [
  () => 'action=phi.read',
  () => 'resource_type=claim',
  () => `user_id=user-${Math.floor(Math.random() * 5000)}`,
  () => `resource_id=claim-${Math.floor(Math.random() * 100_000)}`,
];
const serviceCursors = new Map<string, string>();
const bareCursors = new Map<string, string>();
for (const tenant of tenants) {
  const first = (await (
    await fetch(`http://127.0.0.1:${apiPort}/api/v2/public/audit/events?limit=100`, {
      headers: { authorization: `Bearer ${keys.get(tenant)}` },
    })
  ).json()) as { page: { next_cursor: string } };
  serviceCursors.set(tenant, first.page.next_cursor);
  const bareFirst = (await (await fetch(`http://127.0.0.1:${barePort}/events?tenant=${tenant}&limit=100`)).json()) as {
    page: { next_cursor: string };
  };
  bareCursors.set(tenant, bareFirst.page.next_cursor);
}
const pick = <T>(items: readonly T[]) => items[Math.floor(Math.random() * items.length)]!;
function variant(): { filter?: string; cursor: boolean } {
  const roll = Math.random();
  if (roll < 0.6) return { cursor: false };
  if (roll < 0.85) return { filter: pick(FILTERS)(), cursor: false };
  return { cursor: true };
}
const serviceRequest = () => {
  const tenant = pick(tenants);
  const { filter, cursor } = variant();
  const query = ['limit=100', filter, cursor ? `cursor=${serviceCursors.get(tenant)}` : undefined].filter(Boolean).join('&');
  return { path: `/api/v2/public/audit/events?${query}`, headers: { authorization: `Bearer ${keys.get(tenant)}` } };
};
const bareRequest = () => {
  const tenant = pick(tenants);
  const { filter, cursor } = variant();
  const query = [`tenant=${tenant}`, 'limit=100', filter, cursor ? `cursor=${bareCursors.get(tenant)}` : undefined]
    .filter(Boolean)
    .join('&');
  return { path: `/events?${query}` };
};
const serviceUrl = `http://127.0.0.1:${apiPort}`;
const bareUrl = `http://127.0.0.1:${barePort}`;

// Warm both (JIT, caches), then alternate so that machine noise hits both alike.
await runLoad({ url: serviceUrl, nextRequest: serviceRequest, connections: CONNECTIONS, durationS: 3 });
await runLoad({ url: bareUrl, nextRequest: bareRequest, connections: CONNECTIONS, durationS: 3 });
// Both sides' peaks over the measured runs: the api's beside what a bare server holds for the same pages.
const rss = sampleRss(api.pid!);
const bareRss = sampleRss(bare.pid!);
const serviceRuns = [];
const bareRuns = [];
// CPU seconds per 1,000 requests, by process, so the report says where each side spends the machine.
const cpu = { service: { node: 0, postgres: 0, redis: 0, requests: 0 }, bare: { node: 0, postgres: 0, redis: 0, requests: 0 } };
async function measured(side: 'service' | 'bare', pid: number, load: () => Promise<Awaited<ReturnType<typeof runLoad>>>) {
  const meters = {
    node: cpuMeter(() => [pid]),
    // Only the measured side's own backends: other sessions' Postgres work on a shared machine is not its cost.
    postgres: cpuMeter(() => backendsOf(SERVER_URL, 'audit_bench_list', [side === 'service' ? 'audit-trail api' : 'bare list server'])),
    // By name: the Debian service runs as redis, but a redis-server started by hand (as on these machines) as root.
    redis: cpuMeter(() => pidsOfName('redis-server')),
  };
  const result = await load();
  cpu[side].node += meters.node.elapsed();
  cpu[side].postgres += meters.postgres.elapsed();
  cpu[side].redis += meters.redis.elapsed();
  cpu[side].requests += result.requestsPerSecond * DURATION_S;
  return result;
}
for (let round = 0; round < 2; round += 1) {
  serviceRuns.push(
    await measured('service', api.pid!, () =>
      runLoad({ url: serviceUrl, nextRequest: serviceRequest, connections: CONNECTIONS, durationS: DURATION_S }),
    ),
  );
  bareRuns.push(
    await measured('bare', bare.pid!, () =>
      runLoad({ url: bareUrl, nextRequest: bareRequest, connections: CONNECTIONS, durationS: DURATION_S }),
    ),
  );
}
const perThousand = (side: 'service' | 'bare') =>
  Object.fromEntries(
    (['node', 'postgres', 'redis'] as const).map((key) => [key, Number(((cpu[side][key] / cpu[side].requests) * 1000).toFixed(2))]),
  );
const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
const servicePeak = mean(serviceRuns.map((run) => run.requestsPerSecond));
const barePeak = mean(bareRuns.map((run) => run.requestsPerSecond));
// Evenly spaced arrivals at half the peak (bench/support/load.ts pacedLoad says why not autocannon here).
const half = await pacedLoad({
  url: serviceUrl,
  nextRequest: serviceRequest,
  connections: CONNECTIONS,
  durationS: DURATION_S,
  rate: Math.round(servicePeak / 2),
});
const peakRss = rss.stop();
const bareRssPeak = bareRss.stop();

// Index check: a filter matching 0.5 % of the big tenant against its unfiltered first page.
const bigHeaders = { authorization: `Bearer ${keys.get(BIG_TENANT)}` };
const unfiltered = await sequentialLatency(`${serviceUrl}/api/v2/public/audit/events?limit=100`, bigHeaders, 200);
const rare = await sequentialLatency(`${serviceUrl}/api/v2/public/audit/events?limit=100&action=${RARE_ACTION}`, bigHeaders, 200);

await stopProcess(api);
await stopProcess(bare);
const failures = [...serviceRuns, ...bareRuns, half].reduce((sum, run) => sum + run.non2xx + run.errors, 0);
console.log(
  JSON.stringify(
    {
      benchmark: 'list',
      command: 'node bench/list.ts',
      dataset: '2,000,000 events, 1,000 tenants (tenant-big: 500,000)',
      connections: CONNECTIONS,
      service_rps: serviceRuns.map((run) => Math.round(run.requestsPerSecond)),
      bare_rps: bareRuns.map((run) => Math.round(run.requestsPerSecond)),
      ratio_vs_bare: Number((servicePeak / barePeak).toFixed(2)),
      peak_latency_ms: {
        service_p50: serviceRuns[0]!.p50,
        service_p99: serviceRuns[0]!.p99,
        bare_p50: bareRuns[0]!.p50,
        bare_p99: bareRuns[0]!.p99,
      },
      half_peak: { rate: Math.round(servicePeak / 2), achieved: Math.round(half.requestsPerSecond), p50_ms: half.p50, p99_ms: half.p99 },
      cpu_seconds_per_1000_requests: { service: perThousand('service'), bare: perThousand('bare') },
      api_peak_rss_mb: Math.round(peakRss),
      bare_peak_rss_mb: Math.round(bareRssPeak),
      big_tenant_sequential_ms: {
        unfiltered_p50: Number(unfiltered.p50.toFixed(2)),
        rare_filter_p50: Number(rare.p50.toFixed(2)),
        ratio: Number((rare.p50 / unfiltered.p50).toFixed(2)),
      },
      failed_requests: failures,
      goals: { ratio_vs_bare: '>= 1.0', half_peak_p99_ms: '< 50', api_rss_mb: '< 300', rare_filter_ratio: '<= 3' },
    },
    null,
    2,
  ),
);
