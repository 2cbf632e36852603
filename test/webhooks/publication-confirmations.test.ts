import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import {
  CONFIRM_AFTER_MS,
  DeferredConfirmations,
  UNCONFIRMED_AFTER_MS,
  confirmPublished,
} from '../../src/delivery/publicationConfirmations.ts';
import { PUBLISH_TIMEOUT_MS } from '../../src/delivery/deliveryMessage.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { ManualClock } from '../support/manual-clock.ts';
import { testLogger } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * Publishers confirm the publications JetStream acknowledged a few seconds late, and only for deliveries
 * still in flight then (delivery/publicationConfirmations.ts): the relays' sweep counts an unconfirmed one
 * lost after UNCONFIRMED_AFTER_MS, and a confirmation of a delivery already handled would cost a row version
 * and a row lock for nothing. Real Postgres; the confirmer's clock moved by hand.
 */
describe('deferred publication confirmations', function () {
  this.timeout(30_000);
  let db: TestDatabase;

  before(async () => {
    db = await createTestDatabase();
  });

  after(async () => {
    await db?.drop();
  });

  /** A delivery row as a publisher leaves it: in flight (marked published), or as the test says. */
  async function delivery(row: { state?: string; published?: boolean; publications?: number } = {}): Promise<string> {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at, state, attempts, published_at, publications)
       VALUES ('wh_confirmations', 'confirmations', $1, now(), $2, 0, CASE WHEN $3 THEN now() END, $4) RETURNING id::text AS id`,
      [randomUUID(), row.state ?? 'pending', row.published ?? true, row.publications ?? 1],
    );
    return rows[0]!.id;
  }

  /** The row's confirmation and its version: xmin changes with a new version, xmax with a lock. */
  async function rowOf(id: string): Promise<{ confirmed: number | null; version: string }> {
    const { rows } = await db.pool.query<{ confirmed: number | null; version: string }>(
      `SELECT confirmed_publication AS confirmed, xmin::text || '/' || xmax::text AS version FROM deliveries WHERE id = $1`,
      [id],
    );
    return rows[0]!;
  }

  it("lands within the sweep's bound, after the publish timeout", () => {
    expect(CONFIRM_AFTER_MS).to.be.above(PUBLISH_TIMEOUT_MS);
    expect(CONFIRM_AFTER_MS).to.be.below(UNCONFIRMED_AFTER_MS - 2_000);
  });

  it('confirms a delivery still in flight once CONFIRM_AFTER_MS has passed since its publish began, not before', async () => {
    const clock = new ManualClock(Date.now());
    const confirmations = new DeferredConfirmations({ db: db.pool, log: testLogger(), clock });
    const id = await delivery();
    confirmations.add([{ id, attempt: 1, publication: 1 }], clock.now() - 1_000);
    await clock.advance(CONFIRM_AFTER_MS - 1_001);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await rowOf(id)).confirmed, 'confirmed before its time').to.equal(null);
    await clock.advance(1);
    await waitFor(async () => (await rowOf(id)).confirmed === 1, 'the delivery confirmed');
  });

  it('neither writes nor locks a delivery no longer in flight: handled, handed back, or published again', async () => {
    const clock = new ManualClock(Date.now());
    const confirmations = new DeferredConfirmations({ db: db.pool, log: testLogger(), clock });
    const handled = await delivery({ state: 'succeeded', published: false });
    const handedBack = await delivery({ published: false });
    const publishedAgain = await delivery({ publications: 2 });
    const inFlight = await delivery();
    const before = await Promise.all([handled, handedBack, publishedAgain].map(rowOf));
    confirmations.add(
      [handled, handedBack, publishedAgain, inFlight].map((id) => ({ id, attempt: 1, publication: 1 })),
      clock.now(),
    );
    await clock.advance(CONFIRM_AFTER_MS);
    await waitFor(async () => (await rowOf(inFlight)).confirmed === 1, 'the delivery in flight confirmed');
    expect(await Promise.all([handled, handedBack, publishedAgain].map(rowOf))).to.deep.equal(before);
  });

  it('skips a delivery another transaction holds (a worker settling it) rather than waiting for it', async () => {
    const confirmations = new DeferredConfirmations({ db: db.pool, log: testLogger(), clock: new ManualClock(Date.now()) });
    const held = await delivery();
    const free = await delivery();
    const worker = await db.pool.connect();
    try {
      await worker.query('BEGIN');
      await worker.query('SELECT id FROM deliveries WHERE id = $1 FOR UPDATE', [held]);
      confirmations.add(
        [held, free].map((id) => ({ id, attempt: 1, publication: 1 })),
        0,
      );
      await confirmations.flush();
      expect([(await rowOf(held)).confirmed, (await rowOf(free)).confirmed]).to.deep.equal([null, 1]);
    } finally {
      await worker.query('ROLLBACK');
      worker.release();
    }
  });

  it('writes every confirmation waiting when flushed (a stopping publisher), due or not', async () => {
    const clock = new ManualClock(Date.now());
    const confirmations = new DeferredConfirmations({ db: db.pool, log: testLogger(), clock });
    const first = await delivery();
    const second = await delivery({ publications: 3 });
    confirmations.add([{ id: first, attempt: 1, publication: 1 }], clock.now());
    confirmations.add([{ id: second, attempt: 1, publication: 3 }], clock.now() + 1_000);
    await confirmations.flush();
    expect([(await rowOf(first)).confirmed, (await rowOf(second)).confirmed]).to.deep.equal([1, 3]);
  });

  it('confirms a backlog in flight visiting each row a bounded number of times, whatever plan Postgres picks', async () => {
    // Confirmations matter most when a worker is behind and thousands of deliveries are still in flight. The
    // generic plan Postgres settles on for a prepared statement once ran the locking subquery again for
    // every row in flight: 2,000 rows took 3.6 s and two million scans of the primary key. That plan is forced
    // here, and the count of this transaction's scans of the primary key says whether the statement stays linear.
    const backlog = 2_000;
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at, state, attempts, published_at, publications)
       SELECT 'wh_backlog', 'confirmations', gen_random_uuid(), now(), 'pending', 0, now(), 1 FROM generate_series(1, $1)
       RETURNING id::text AS id`,
      [backlog],
    );
    // With the table's statistics, as autovacuum keeps them.
    await db.pool.query('ANALYZE deliveries');
    const client = await db.pool.connect();
    try {
      await client.query('SET plan_cache_mode = force_generic_plan');
      await client.query('BEGIN');
      await confirmPublished(
        client,
        rows.map(({ id }) => ({ id, attempt: 1, publication: 1 })),
        testLogger(),
      );
      const { rows: stats } = await client.query<{ scans: string }>(
        `SELECT pg_stat_get_xact_numscans('deliveries_pkey'::regclass)::text AS scans`,
      );
      await client.query('COMMIT');
      expect(Number(stats[0]!.scans), 'scans of deliveries_pkey').to.be.at.most(3 * backlog);
    } finally {
      await client.query('RESET plan_cache_mode').catch(() => undefined);
      client.release();
    }
    const { rows: confirmed } = await db.pool.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM deliveries WHERE endpoint_id = 'wh_backlog' AND confirmed_publication = 1`,
    );
    expect(confirmed[0]!.count).to.equal(backlog);
  });
});
