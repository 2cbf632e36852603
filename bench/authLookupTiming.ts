/**
 * Where an unknown key id and a known id with a wrong secret differ in cost (issue 28, item 4), layer by
 * layer: the SQL alone, the store function, the verifier, the whole 401 over HTTP. Each stage times three
 * cases per round in random order: the known id, a fresh random id, and a control, a fixed id that no key
 * has. The control is made exactly as the known id is, so its shift against the random id is the bench's
 * own bias (with the known id reused and only the unknown id's bytes drawn before the clock started, such
 * a control moved by 4 to 8 µs); a known-id shift beside a control near zero is the server's.
 *
 *   node bench/authLookupTiming.ts [rounds]     BENCH_STAGES=sql,store,verify,http  BENCH_UNKNOWN=above
 *
 * BENCH_UNKNOWN=above draws unknown ids past the last key only: the lookup's wrap-around branch.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { Agent, request } from 'undici';
import { hashKeySecret } from '../src/auth/apiKeyFormat.ts';
import { FIND_API_KEY_OR_DECOY_SQL, findApiKeyOrDecoy } from '../src/auth/apiKeyStore.ts';
import { ApiKeyVerifier } from '../src/auth/apiKeyVerifier.ts';
import { Database, prepared } from '../src/db/database.ts';
import { createTestDatabase } from '../test/support/database.ts';
import { mintKey, startTestService, testLogger, TEST_PEPPER } from '../test/support/service.ts';
import { mannWhitneyZ, median } from '../test/support/statistics.ts';

const ROUNDS = Number(process.argv[2] ?? 5_000);
const STAGES = (process.env.BENCH_STAGES ?? 'sql,store,verify,http').split(',');
const UNKNOWN_ABOVE = process.env.BENCH_UNKNOWN === 'above';

/** The lookup before this change: a LEFT JOIN on equality, which fetched a heap row for a known id only. */
const EQUALITY_JOIN_SQL = `SELECT key.lookup_id IS NOT NULL AS found, wanted.lookup_id,
            coalesce(key.environment, $2) AS environment, coalesce(key.secret_hash, $3::bytea) AS secret_hash,
            coalesce(key.tenant_id, '') AS tenant_id, coalesce(key.scopes, '{}'::text[]) AS scopes,
            coalesce(key.allowed_cidrs, '{}'::text[]) AS allowed_cidrs, coalesce(key.description, '') AS description,
            key.managed_by, coalesce(key.created_at, now()) AS created_at,
            CASE WHEN key.lookup_id IS NULL THEN now() ELSE key.revoked_at END AS revoked_at
       FROM (SELECT $1::text AS lookup_id) AS wanted
       LEFT JOIN api_keys AS key ON key.lookup_id = wanted.lookup_id`;

type Kind = 'known' | 'control' | 'unknown';
const KINDS: readonly Kind[] = ['known', 'control', 'unknown'];

const testDb = await createTestDatabase();
const knownId = (await mintKey(testDb.url, { tenantId: 'timing', scopes: ['audit:read'] })).lookupId;
const fixedIds = { known: Buffer.from(knownId, 'hex'), control: Buffer.from(knownId === '0badc0de' ? '0badc0df' : '0badc0de', 'hex') };

/** Every case draws random bytes and hex-encodes an id, so that they differ only in which id they carry. */
function makeId(kind: Kind): string {
  let drawn = randomBytes(4);
  while (UNKNOWN_ABOVE && drawn.toString('hex') <= knownId) drawn = randomBytes(4);
  return (kind === 'unknown' ? drawn : fixedIds[kind]).toString('hex');
}

/** Times `run` for the three kinds in random order per round; prints medians, paired shifts and z (µs). */
async function stage(name: string, run: (id: string) => Promise<unknown>): Promise<void> {
  for (let index = 0; index < 300; index += 1) for (const kind of KINDS) await run(makeId(kind));
  const times: Record<Kind, number[]> = { known: [], control: [], unknown: [] };
  for (let index = 0; index < ROUNDS; index += 1) {
    const order = KINDS.map((kind) => ({ kind, at: Math.random() })).sort((x, y) => x.at - y.at);
    for (const { kind } of order) {
      const id = makeId(kind);
      const started = performance.now();
      await run(id);
      times[kind].push((performance.now() - started) * 1000);
    }
  }
  const against = (kind: Kind) => {
    const shift = median(times[kind].map((value, index) => value - times.unknown[index]!));
    return `${kind} ${median(times[kind]).toFixed(1).padStart(6)} (shift ${shift.toFixed(2).padStart(5)}, z ${mannWhitneyZ(times.unknown, times[kind]).toFixed(2).padStart(5)})`;
  };
  console.log(`${name.padEnd(36)} unknown ${median(times.unknown).toFixed(1).padStart(6)}  ${against('known')}  ${against('control')}`);
}

console.log(
  `load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}, ${ROUNDS} rounds, ` +
    `unknown ids ${UNKNOWN_ABOVE ? 'past the last key' : 'anywhere'}; times in µs, shifts are paired against the unknown id`,
);
const db = new Database({ url: testDb.url, poolSize: 1, applicationName: 'bench auth timing', log: testLogger() });
const decoy = { environment: 'live' as const, secretHash: hashKeySecret(TEST_PEPPER, 'decoy-secret-that-matches-no-key') };
// Every value as the text Postgres sent: the SQL stage leaves the driver's parsing out.
const unparsed = { getTypeParser: () => (value: string) => value } as unknown as pg.CustomTypesConfig;
const secret = () => randomBytes(16).toString('hex');
if (STAGES.includes('sql')) {
  for (const [label, text] of [
    ['equality join', EQUALITY_JOIN_SQL],
    ['nearest row', FIND_API_KEY_OR_DECOY_SQL],
  ] as const) {
    await stage(`${label}, SQL text`, (id) => db.query({ text, values: [id, decoy.environment, decoy.secretHash], types: unparsed }));
    await stage(`${label}, prepared`, (id) => db.query({ ...prepared(text, [id, decoy.environment, decoy.secretHash]), types: unparsed }));
  }
}
if (STAGES.includes('store')) await stage('findApiKeyOrDecoy', (id) => findApiKeyOrDecoy(db, id, decoy));
if (STAGES.includes('verify')) {
  const verifier = new ApiKeyVerifier({ db, databaseUrl: testDb.url, pepper: TEST_PEPPER, environment: 'live', log: testLogger() });
  await stage('ApiKeyVerifier.verify', (id) =>
    verifier.verify(`Bearer atr_live_${id}_${secret()}`, '127.0.0.1').then(
      () => Promise.reject(new Error('a wrong secret passed')),
      () => undefined,
    ),
  );
}
if (STAGES.includes('http')) {
  const service = await startTestService({
    databaseUrl: testDb.url,
    roles: ['api'],
    env: { RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '100000000' },
  });
  const agent = new Agent({ connections: 1 });
  await stage('401 over HTTP', async (id) => {
    const response = await request(`${service.baseUrl}/audit/events`, {
      dispatcher: agent,
      headers: { authorization: `Bearer atr_live_${id}_${secret()}` },
    });
    await response.body.text();
    if (response.statusCode !== 401) throw new Error(`answered ${response.statusCode}`);
  });
  await agent.close();
  await service.stop();
}
await db.close();
await testDb.drop();
