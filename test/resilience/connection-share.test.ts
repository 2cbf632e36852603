import { expect } from 'chai';
import { Writable } from 'node:stream';
import pg from 'pg';
import { createLogger } from '../../src/platform/logger.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { PrivatePostgres } from '../support/private-services.ts';
import { mintKey, startTestService, type TestService } from '../support/service.ts';

const MAX_CONNECTIONS = 12;
/** max_connections less the 3 superuser_reserved_connections (Postgres' default). */
const ORDINARY_SLOTS = 9;

/**
 * Issue 42, item 6: against a Postgres with few connections, the service (connecting as a superuser, as
 * it does locally) keeps its pools within half of the slots ordinary roles get (docs/operations.md) and
 * never sits in the superuser-reserved ones, however many requests wait; and a storm of refused requests
 * is logged at a bounded rate, not one line each. A private Postgres with max_connections 12.
 */
describe('connection pools within their share of max_connections', function () {
  this.timeout(120_000);
  let postgres: PrivatePostgres;
  let db: TestDatabase;
  let admin: pg.Client;
  let api: TestService;
  let key: string;
  const lines: string[] = [];
  const hogs: pg.Client[] = [];

  before(async () => {
    postgres = await PrivatePostgres.start({ settings: { max_connections: String(MAX_CONNECTIONS) } });
    db = await createTestDatabase(postgres.url);
    await seedEvents(
      db.url,
      Array.from({ length: 50 }, () => newEvent({ tenantId: 'share' })),
    );
    ({ key } = await mintKey(db.url, { tenantId: 'share', scopes: ['audit:read'] }));
    await db.pool.end();
    admin = new pg.Client({ connectionString: `${postgres.url}/postgres`, application_name: 'test admin' });
    admin.on('error', () => undefined);
    await admin.connect();
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    api = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      log: createLogger('info', sink),
      env: { DATABASE_POOL_SIZE: '20', RATE_LIMIT_READ_PER_MINUTE: '1000000' },
    });
  });

  after(async () => {
    for (const hog of hogs) await hog.end().catch(() => undefined);
    await api?.stop();
    await admin?.end().catch(() => undefined);
    await postgres?.remove();
  });

  /** Client connections open now (older than 100 ms: a connection the guard is closing lives a round trip). */
  async function connections(): Promise<{ all: number; service: number }> {
    const { rows } = await admin.query(
      `SELECT count(*)::int AS all,
              count(*) FILTER (WHERE application_name LIKE 'audit-trail%')::int AS service
       FROM pg_stat_activity WHERE backend_type = 'client backend' AND backend_start < now() - interval '100 ms'`,
    );
    return rows[0];
  }

  /** `requests` list requests, `concurrency` at a time; their statuses, counted. */
  async function hammer(requests: number, concurrency: number): Promise<Map<number, number>> {
    const statuses = new Map<number, number>();
    let left = requests;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (left-- > 0) {
          const response = await fetch(`${api.baseUrl}/audit/events?limit=50`, { headers: { authorization: `Bearer ${key}` } });
          await response.arrayBuffer();
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        }
      }),
    );
    return statuses;
  }

  it('holds at most half the ordinary slots under load, and none of the reserved ones', async () => {
    let most = { all: 0, service: 0 };
    let loading = true;
    const sampler = (async () => {
      while (loading) {
        const now = await connections();
        most = { all: Math.max(most.all, now.all), service: Math.max(most.service, now.service) };
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const statuses = await hammer(1_500, 40);
    loading = false;
    await sampler;
    // The code before this cap answered 531 of these with 503 (its pools took every slot). A request may still
    // wait past the pool's 3 s queue bound on a busy machine (CI's suite saw 11 of 1,500): a few, never more.
    const figures = JSON.stringify(Object.fromEntries(statuses));
    expect((statuses.get(200) ?? 0) + (statuses.get(503) ?? 0), figures).to.equal(1_500);
    expect(statuses.get(503) ?? 0, figures).to.be.at.most(15);
    // The pool's half (4), beside the api's LISTEN connection for key revocations.
    expect(most.service, 'the service').to.be.at.most(Math.floor(ORDINARY_SLOTS / 2) + 1);
    expect(most.all, 'all client connections').to.be.at.most(ORDINARY_SLOTS);
  });

  it('refuses rather than take a reserved slot, and logs the refusals at a bounded rate', async () => {
    // Every client backend counted, however new (a LISTEN connection coming back meanwhile among them): the
    // hogs connect as superusers, and one too many would sit in a reserved slot itself.
    const count = async (where: string) =>
      (await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' ${where}`)).rows[0]
        .n as number;
    // The service's connections ended and every ordinary slot taken by hogs. A connection of the service's that
    // was opening meanwhile (the first test's pool, the LISTEN one coming back) would keep an ordinary slot and
    // serve: it is ended too, and the slot it leaves filled, until the service holds none.
    // Told apart from the test's own by name, not by the service's: a backend still starting up has none yet.
    const NOT_OURS = "AND application_name NOT IN ('hog', 'test admin')";
    let filled = false;
    for (let round = 0; round < 10 && !filled; round += 1) {
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' ${NOT_OURS}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      while ((await count('')) < ORDINARY_SLOTS) {
        const hog = new pg.Client({ connectionString: `${postgres.url}/postgres`, application_name: 'hog' });
        hog.on('error', () => undefined);
        await hog.connect();
        hogs.push(hog);
        await new Promise((resolve) => setTimeout(resolve, 110));
      }
      // Long enough for a connection that was opening to be through its start-up and its slot check.
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Full with ours alone, counted by name. The filling above counts every backend, a connection of the
      // service's that its slot check was closing among them: once gone, it left an ordinary slot free, which
      // the service's pool then took and served from (a CI run's 341 answers of 400 were 200s).
      filled = (await count(NOT_OURS)) === 0 && (await count("AND application_name IN ('hog', 'test admin')")) >= ORDINARY_SLOTS;
    }
    expect(filled, 'every ordinary slot held by the test, none by the service').to.equal(true);
    const before = lines.length;
    const filledAt: Date = (await admin.query('SELECT clock_timestamp() AS at')).rows[0].at;
    const hammerStarted = performance.now();
    const statuses = await hammer(400, 20);
    const hammerMs = performance.now() - hammerStarted;
    expect(statuses.get(503), JSON.stringify(Object.fromEntries(statuses))).to.equal(400);
    // Every connection the service opened once the ordinary slots were full would have sat in a reserved
    // one: none stays (one the guard turns away lives a round trip).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const reserved = await admin.query(
      `SELECT application_name, backend_start FROM pg_stat_activity
       WHERE backend_type = 'client backend' AND application_name LIKE 'audit-trail%' AND backend_start > $1`,
      [filledAt],
    );
    expect(reserved.rows, 'service connections in reserved slots').to.deep.equal([]);
    const warnings = lines.slice(before).filter((line) => line.includes('"level":"warn"') || line.includes('"level":40'));
    // One line per kind of refusal (the slot guard's 53300, a connect timeout on a loaded machine) and 10 s,
    // whatever the number of requests: 400 refusals, a handful of lines.
    const bound = 2 * (1 + Math.ceil(hammerMs / 10_000));
    expect(warnings.length, warnings.slice(0, 3).join('\n')).to.be.at.most(bound);
    // Room again: the service serves at once.
    for (const hog of hogs.splice(0)) await hog.end();
    expect((await hammer(10, 2)).get(200)).to.equal(10);
  });
});
