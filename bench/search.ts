/**
 * Search, action families, the count and the action list (issue 47): what each costs a request against a
 * tenant of 100,000 events, next to a plain list page measured in the same run (the baseline). The search's
 * worst case is a text no event holds: its walk examines SEARCH_SCAN_ROWS events and finds nothing.
 *
 *   node bench/search.ts                      BENCH_SEARCH_ROUNDS (default 40) sequential requests per query
 */
import { SEARCH_SCAN_ROWS } from '../src/events/eventSearch.ts';
import { createTestDatabase } from '../test/support/database.ts';
import { median } from '../test/support/statistics.ts';
import { startApiProcess } from './support/apiProcess.ts';
import { seedBigTenant } from './support/bigTenant.ts';
import { mintBenchKeys } from './support/keys.ts';
import { stopProcess } from './support/processes.ts';

const EVENTS = 100_000;
const ROUNDS = Number(process.env.BENCH_SEARCH_ROUNDS ?? 40);
const TENANT = 'clinic-big';
const ACTIONS = ['phi.read', 'phi.query', 'phi.export', 'admin.user.update', 'auth.login', 'auth.logout'];

const db = await createTestDatabase();
let api: Awaited<ReturnType<typeof startApiProcess>> | undefined;
try {
  await seedBigTenant(db.url, TENANT, EVENTS, ACTIONS, Date.now());
  // The statistics autovacuum gathers on a table this size in production: without them Postgres reckons on a
  // few hundred rows of the tenant and may sort every one of them to find the walk's end.
  await db.pool.query('ANALYZE events');
  api = await startApiProcess(db.url);
  const key = (await mintBenchKeys(db.url, [TENANT], ['audit:read'])).get(TENANT)!;
  const base = `${api.baseUrl}/api/v2/public`;
  const timed = async (path: string) => {
    const begin = performance.now();
    const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } });
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`${path}: ${response.status}`);
    return performance.now() - begin;
  };
  const queries: Record<string, string> = {
    baseline_list: '/audit/events?limit=50',
    search_page_fills: '/audit/events?limit=50&q=user-42',
    search_rare: '/audit/events?limit=50&q=patient-19999',
    search_no_match_full_walk: '/audit/events?limit=50&q=no-such-text',
    action_prefix_auth: '/audit/events?limit=50&action_prefix=auth.',
    count_unfiltered_capped: '/audit/events/count',
    count_prefix: '/audit/events/count?action_prefix=auth.',
    actions: '/audit/actions',
  };
  for (const path of Object.values(queries)) await timed(path); // warm-up
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(queries).map((name) => [name, []]));
  // Interleaved rounds, so that the machine's moods fall on every query alike.
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const [name, path] of Object.entries(queries)) times[name]!.push(await timed(path));
  }
  const p95 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.95)]!;
  const baseline = median(times.baseline_list!);
  console.log(
    JSON.stringify({
      events: EVENTS,
      rounds: ROUNDS,
      search_scan_rows: SEARCH_SCAN_ROWS,
      ...Object.fromEntries(
        Object.entries(times).map(([name, values]) => [
          name,
          {
            median_ms: Number(median(values).toFixed(1)),
            p95_ms: Number(p95(values).toFixed(1)),
            ratio: Number((median(values) / baseline).toFixed(1)),
          },
        ]),
      ),
    }),
  );
} finally {
  if (api) await stopProcess(api.child);
  await db.drop();
}
