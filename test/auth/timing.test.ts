import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'undici';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { mintKey, startTestService, type TestService } from '../support/service.ts';

const median = (values: readonly number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

describe('401 timing does not tell which key ids exist or were used recently', function () {
  this.timeout(180_000);
  const SAMPLES = 3_000;
  let db: TestDatabase;
  let service: TestService;
  let lookupId: string;
  let agent: Agent;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      // Thousands of failures from one address: the auth-failure limit would answer them 429 instead.
      env: { RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '100000000' },
    });
    lookupId = (await mintKey(db.url, { tenantId: 'timing', scopes: ['audit:read'] })).lookupId;
    // One kept-alive connection: each sample is one request's time on the server, not a handshake's.
    agent = new Agent({ connections: 1 });
  });

  after(async () => {
    await agent?.close();
    await service?.stop();
    await db?.drop();
  });

  const secret = () => randomBytes(16).toString('hex');
  // A lookup id nobody used (new for every request, as a prober's guesses are) and the known id with a
  // wrong secret (the same id every time, as a prober confirming an id would send it).
  const unknownKey = () => `atr_live_${randomBytes(4).toString('hex')}_${secret()}`;
  const knownIdWrongSecret = () => `atr_live_${lookupId}_${secret()}`;

  async function timeOne(key: string): Promise<number> {
    const started = performance.now();
    const response = await request(`${service.baseUrl}/audit/events`, { dispatcher: agent, headers: { authorization: `Bearer ${key}` } });
    const body = await response.body.text();
    const elapsed = performance.now() - started;
    expect(response.statusCode).to.equal(401);
    expect(body).to.equal('{"error":"unauthorized"}');
    return elapsed;
  }

  it('answers an unknown key id and a known id with a wrong secret in times within 5 % of each other (3,000 back-to-back pairs)', async () => {
    for (let index = 0; index < 200; index += 1) {
      await timeOne(unknownKey());
      await timeOne(knownIdWrongSecret());
    }
    const unknown: number[] = [];
    const known: number[] = [];
    const shifts: number[] = [];
    for (let index = 0; index < SAMPLES; index += 1) {
      // Back to back, in random order within each pair, so drift in the machine's load falls on both alike
      // and each pair's difference is the id's own cost.
      const unknownFirst = Math.random() < 0.5;
      const first = await timeOne(unknownFirst ? unknownKey() : knownIdWrongSecret());
      const second = await timeOne(unknownFirst ? knownIdWrongSecret() : unknownKey());
      const [unknownTime, knownTime] = unknownFirst ? [first, second] : [second, first];
      unknown.push(unknownTime);
      known.push(knownTime);
      shifts.push(knownTime - unknownTime);
    }
    const typical = median([...unknown, ...known]);
    const shift = median(shifts);
    const summary = `unknown id median ${median(unknown).toFixed(3)} ms, known id median ${median(known).toFixed(3)} ms, median paired shift ${(shift * 1000).toFixed(1)} µs`;
    // A bound on the size of the difference, not a significance test. 3,000 pairs make a test significant
    // for the few microseconds (about 1 %) Postgres spends fetching a row that exists, which is real but no
    // use to a prober: at 30 failed attempts a minute per address (RATE_LIMIT_AUTH_FAILURES_PER_MINUTE),
    // telling 1 % apart through a network's jitter takes hours per guessed id, among 2^32. The defect this
    // guards against, a 401 answered from the cache for a recently used id, was a 90 % shift.
    expect(Math.abs(shift), summary).to.be.below(0.05 * typical);
  });
});
