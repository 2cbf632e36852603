import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { readBatchFacts } from '../../src/delivery/outcomeStore.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * What the outcome recorder reads of a batch under its endpoints' locks (delivery/outcomeStore.ts): the
 * deliveries' facts, and which endpoints have parked deliveries, whose releases are the only ones it writes.
 * Real Postgres.
 */
describe('the facts of an outcome batch', function () {
  this.timeout(30_000);
  let db: TestDatabase;

  before(async () => {
    db = await createTestDatabase();
  });

  after(async () => {
    await db?.drop();
  });

  async function delivery(endpointId: string, state: string, attempts = 0): Promise<string> {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at, state, attempts)
       VALUES ($1, 'facts', $2, now(), $3, $4) RETURNING id::text AS id`,
      [endpointId, randomUUID(), state, attempts],
    );
    return rows[0]!.id;
  }

  it('reads the deliveries it names, without deleted ones, and names the endpoints that have parked deliveries', async () => {
    const pending = await delivery('wh_facts_busy', 'pending', 2);
    await delivery('wh_facts_busy', 'parked');
    const quiet = await delivery('wh_facts_quiet', 'pending');
    await delivery('wh_facts_other', 'parked');
    const deleted = await delivery('wh_facts_quiet', 'pending');
    await db.pool.query('DELETE FROM deliveries WHERE id = $1::int8', [deleted]);

    const facts = await readBatchFacts(db.pool, [pending, quiet, deleted], ['wh_facts_busy', 'wh_facts_quiet', 'wh_facts_gone']);

    expect(Object.fromEntries(facts.deliveries)).to.deep.equal({
      [pending]: { state: 'pending', attempts: 2, failureCounted: false },
      [quiet]: { state: 'pending', attempts: 0, failureCounted: false },
    });
    // Another endpoint's parked deliveries are not the batch's.
    expect([...facts.withParked]).to.deep.equal(['wh_facts_busy']);
  });

  it('names no endpoint once its parked deliveries are pending again', async () => {
    const parked = await delivery('wh_facts_released', 'parked');
    expect([...(await readBatchFacts(db.pool, [parked], ['wh_facts_released'])).withParked]).to.deep.equal(['wh_facts_released']);
    await db.pool.query(`UPDATE deliveries SET state = 'pending' WHERE id = $1::int8`, [parked]);
    expect([...(await readBatchFacts(db.pool, [parked], ['wh_facts_released'])).withParked]).to.deep.equal([]);
  });
});
