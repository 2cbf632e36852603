/**
 * Limiter overhead (issue 3): list throughput with per-key rate limiting on (Redis, limits raised so that
 * nothing is refused) against the same api with the limiter left out, in the same run, alternating.
 *
 *   node bench/limiter.ts
 */
import { BIG_TENANT, LIST_DATABASE_URL, TENANTS, ensureListDataset } from './support/listDataset.ts';
import { startApiProcess } from './support/apiProcess.ts';
import { mintBenchKeys } from './support/keys.ts';
import { runLoad } from './support/load.ts';
import { stopProcess } from './support/processes.ts';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
await ensureListDataset((line) => console.error(line));
const tenants = [
  BIG_TENANT,
  ...Array.from({ length: 49 }, (_, index) => `tenant-${String((index * 19 + 5) % (TENANTS - 1)).padStart(4, '0')}`),
];
const keys = await mintBenchKeys(LIST_DATABASE_URL, tenants, ['audit:read']);
const request = () => {
  const tenant = tenants[Math.floor(Math.random() * tenants.length)]!;
  return { path: '/api/v2/public/audit/events?limit=100', headers: { authorization: `Bearer ${keys.get(tenant)}` } };
};

const results: Record<'on' | 'off', number[]> = { on: [], off: [] };
let refused = 0;
for (let round = 0; round < 2; round += 1) {
  for (const mode of ['on', 'off'] as const) {
    const api = await startApiProcess(LIST_DATABASE_URL, { rateLimiting: mode === 'on' });
    await runLoad({ url: api.baseUrl, nextRequest: request, connections: 64, durationS: 3 });
    const result = await runLoad({ url: api.baseUrl, nextRequest: request, connections: 64, durationS: DURATION_S });
    refused += result.non2xx;
    results[mode].push(result.requestsPerSecond);
    await stopProcess(api.child);
  }
}
const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
console.log(
  JSON.stringify(
    {
      benchmark: 'limiter overhead',
      command: 'node bench/limiter.ts',
      limiter_on_rps: results.on.map(Math.round),
      limiter_off_rps: results.off.map(Math.round),
      ratio_on_vs_off: Number((mean(results.on) / mean(results.off)).toFixed(2)),
      refused_requests: refused,
      goals: { ratio_on_vs_off: '>= 0.85', refused_requests: 0 },
    },
    null,
    2,
  ),
);
