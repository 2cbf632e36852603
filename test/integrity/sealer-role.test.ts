import { expect } from 'chai';
import { verifyTreeHead, type SignedTreeHead } from '../../src/client/integrity.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { checkIntegrity } from '../../src/integrity/integrityCheck.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/** The message a promise is rejected with. */
async function rejection(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('expected a rejection');
}

/** Every event of the database with its leaf count: each must be exactly 1. */
async function leafCounts(db: TestDatabase): Promise<Array<{ event_id: string; leaves: number }>> {
  const { rows } = await db.pool.query(
    `SELECT e.event_id::text, count(l.leaf_index)::int AS leaves
       FROM events e LEFT JOIN merkle_leaves l ON l.event_id = e.event_id AND l.tenant_id = e.tenant_id AND l.event_occurred_at = e.occurred_at
      GROUP BY e.tenant_id, e.occurred_at, e.event_id`,
  );
  return rows;
}

describe('the sealer role', function () {
  this.timeout(90_000);
  let db: TestDatabase;

  beforeEach(async () => {
    db = await createTestDatabase();
  });

  afterEach(async () => {
    await db?.drop();
  });

  it('seals a transaction that commits after later ones were sealed, exactly once', async () => {
    const key = sealKeyPair();
    const sealer = await startTestSealer(db.url, key.privateKey);
    const late = newEvent({ tenantId: 'late' });
    const client = await db.pool.connect();
    try {
      // Inserted first (its queue row has the smaller id), committed last.
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, phi_involved, success, document)
         VALUES ($1, $2, $3, 'phi.read', 'u', 'r', 'claim', 'c', true, true, $4)`,
        [
          late.tenantId,
          new Date(late.occurredAtMs).toISOString(),
          late.eventId,
          renderEventDocument(late, formatTimestamp(late.occurredAtMs)),
        ],
      );
      await seedEvents(
        db.url,
        Array.from({ length: 50 }, () => newEvent({ tenantId: 'late' })),
      );
      expect((await sealer.sealNow()).sealed).to.equal(50);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect((await sealer.sealNow()).sealed).to.equal(1);
    const counts = await leafCounts(db);
    expect(counts).to.have.length(51);
    expect(counts.every((row) => row.leaves === 1)).to.equal(true);
    await sealer.close();
  });

  it('queues a bulk statement in rows of 1,000 and seals it in bounded transactions, oldest first', async () => {
    // The month's partition is made here: a raw INSERT does not go through the writer, which makes it, and
    // the template database holds only the months around the day it was built.
    await db.pool.query(`SELECT audit_ensure_event_partition(timestamptz '2026-10-01T00:00:00Z')`);
    await db.pool.query(
      `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, phi_involved, success)
       SELECT 'bulk', timestamptz '2026-10-01T00:00:00Z' + i * interval '1 millisecond', gen_random_uuid(), 'phi.read', 'u', 'r', 'claim', 'c', true, true
         FROM generate_series(1, 12000) AS i`,
    );
    const { rows } = await db.pool.query(`SELECT cardinality(event_ids) AS n FROM seal_queue WHERE tenant_id = 'bulk' ORDER BY id`);
    expect(rows.map((row: { n: number }) => row.n)).to.deep.equal(Array(12).fill(1000));
    const sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    const pass = await sealer.sealNow();
    expect(pass).to.deep.equal({ sealed: 12000, heads: 2, busy: 0 });
    const order = await db.pool.query(
      `SELECT bool_and(ok) AS ordered FROM (SELECT event_occurred_at >= lag(event_occurred_at) OVER (ORDER BY leaf_index) AS ok FROM merkle_leaves WHERE tenant_id = 'bulk') steps`,
    );
    expect(order.rows[0].ordered).to.equal(true);
    // A tree deep enough for full tiles on two levels: the integrity check recomputes each from the one below.
    expect((await checkIntegrity(sealer.db, { tenantId: 'bulk', sealIntervalMs: 10_000 }))[0]!.problems).to.deep.equal([]);
    // Every bit of the first byte flipped: setting it to a fixed value left it as it was when it already held
    // that value (1 run in 256: a CI run failed so).
    await db.pool.query(
      `UPDATE merkle_tiles SET hashes = set_byte(hashes, 0, get_byte(hashes, 0) # 255) WHERE tenant_id = 'bulk' AND level = 1 AND tile_index = 0`,
    );
    // The altered entry disagrees with the tile below it and with the entry above it.
    const problems = (await checkIntegrity(sealer.db, { tenantId: 'bulk', sealIntervalMs: 10_000 }))[0]!.problems;
    expect(problems.map((problem) => problem.message)).to.deep.equal([
      'tile 0/0 does not hash to its entry in the level above',
      'tile 1/0 does not hash to its entry in the level above',
    ]);
    await sealer.close();
  });

  it('lets several sealers run at once without sealing an event twice or skipping one', async () => {
    const key = sealKeyPair();
    const sealers = await Promise.all([1, 2, 3].map(() => startTestSealer(db.url, key.privateKey)));
    const writing = (async () => {
      for (let round = 0; round < 20; round += 1) {
        await seedEvents(
          db.url,
          Array.from({ length: 30 }, (_, i) => newEvent({ tenantId: `t${(round + i) % 4}` })),
        );
      }
    })();
    const sealing = sealers.map(async (sealer) => {
      for (let pass = 0; pass < 15; pass += 1) await sealer.sealNow();
    });
    await Promise.all([writing, ...sealing]);
    for (const sealer of sealers) await sealer.sealNow();
    const counts = await leafCounts(db);
    expect(counts).to.have.length(600);
    expect(counts.filter((row) => row.leaves !== 1)).to.deep.equal([]);
    const { rows } = await db.pool.query(
      `SELECT t.tenant_id, t.tree_size, (SELECT count(*)::int FROM merkle_leaves l WHERE l.tenant_id = t.tenant_id) AS leaves,
              (SELECT max(leaf_index)::int FROM merkle_leaves l WHERE l.tenant_id = t.tenant_id) AS last FROM merkle_trees t`,
    );
    for (const row of rows) expect(row.leaves).to.equal(row.tree_size) && expect(row.last).to.equal(row.tree_size - 1);
    for (const sealer of sealers) await sealer.close();
  });

  it('runs in the service on SEAL_INTERVAL, reports its backlog, and refuses a bad SEAL_SIGNING_KEY by name', async () => {
    const key = sealKeyPair();
    const service = await startTestService({
      databaseUrl: db.url,
      roles: ['sealer', 'api'],
      env: { SEAL_INTERVAL: '200ms', SEAL_SIGNING_KEY: key.privatePem },
    });
    try {
      const apiKey = (await mintKey(db.url, { tenantId: 'svc', scopes: ['audit:read'] })).key;
      await seedEvents(
        db.url,
        Array.from({ length: 10 }, () => newEvent({ tenantId: 'svc' })),
      );
      let head: SignedTreeHead | undefined;
      await waitFor(async () => {
        const response = await call(`${service.baseUrl}/audit/integrity/tree-head`, { key: apiKey });
        head = response.json;
        return response.status === 200 && head!.tree_size === 11;
      }, 'sealed within the interval');
      expect(verifyTreeHead(head!, [{ public_key_pem: key.publicPem }])).to.deep.equal({ valid: true });
      const metrics = await (await fetch(`${service.internalUrl}/metrics`)).text();
      expect(metrics).to.match(/^audit_seal_oldest_unsealed_age_seconds 0$/m);
      expect(metrics).to.match(/^audit_events_sealed_total 11$/m);
    } finally {
      await service.stop();
    }
    const bad = startTestService({ databaseUrl: db.url, roles: ['sealer'], env: { SEAL_SIGNING_KEY: 'not a key' } });
    expect(await rejection(bad)).to.match(/SEAL_SIGNING_KEY: must be an Ed25519 private key in PEM/);
    expect(await rejection(startTestService({ databaseUrl: db.url, roles: ['sealer'] }))).to.match(
      /SEAL_SIGNING_KEY: is required by the sealer role/,
    );
  });

  it('turns a running sealer unready once a newer key retires its own', async () => {
    const [oldKey, newKey] = [sealKeyPair(), sealKeyPair()];
    const service = await startTestService({
      databaseUrl: db.url,
      roles: ['sealer'],
      env: { SEAL_INTERVAL: '200ms', SEAL_SIGNING_KEY: oldKey.privatePem },
    });
    try {
      expect((await fetch(`${service.internalUrl}/readyz`)).status).to.equal(200);
      const newer = await startTestSealer(db.url, newKey.privateKey);
      await seedEvents(db.url, [newEvent({ tenantId: 'rot' })]);
      await waitFor(async () => (await fetch(`${service.internalUrl}/readyz`)).status === 503, 'the old sealer unready');
      expect(await newer.sealNow()).to.include({ sealed: 1 });
      await newer.close();
    } finally {
      await service.stop();
    }
  });

  it('rotates keys: the new key retires the old, old heads stay verifiable in its window, and the old key never signs again', async () => {
    const [oldKey, newKey] = [sealKeyPair(), sealKeyPair()];
    const api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    const apiKey = (await mintKey(db.url, { tenantId: 'rot', scopes: ['audit:read'] })).key;
    const get = (path: string) => call(`${api.baseUrl}${path}`, { key: apiKey });
    try {
      const first = await startTestSealer(db.url, oldKey.privateKey);
      await seedEvents(db.url, [newEvent({ tenantId: 'rot' })]);
      await first.sealNow();
      const oldHead = (await get('/audit/integrity/tree-head')).json as SignedTreeHead;

      const second = await startTestSealer(db.url, newKey.privateKey);
      await seedEvents(db.url, [newEvent({ tenantId: 'rot' })]);
      expect(await rejection(first.sealNow())).to.match(/no longer the current signing key/);
      await second.sealNow();
      const newHead = (await get('/audit/integrity/tree-head')).json as SignedTreeHead;
      expect(newHead.key_id).to.equal(second.keyId);

      const published = (await get('/audit/integrity/keys')).json.keys;
      expect(published.map((k: { key_id: string }) => k.key_id)).to.deep.equal([first.keyId, second.keyId]);
      expect(published[0].valid_until).to.be.a('string');
      expect(published[1].valid_until).to.equal(null);
      expect(verifyTreeHead(oldHead, published)).to.deep.equal({ valid: true });
      expect(verifyTreeHead(newHead, published)).to.deep.equal({ valid: true });
      // A head the old key signed after its retirement is refused by its window.
      const { TreeHeadSigner } = await import('../../src/integrity/treeHeadSigner.ts');
      const stale = new TreeHeadSigner(oldKey.privateKey).sign({
        ...newHead,
        timestamp: new Date(Date.parse(published[0].valid_until) + 1).toISOString(),
      });
      expect(verifyTreeHead(stale, published).valid).to.equal(false);
      expect(await rejection(startTestSealer(db.url, oldKey.privateKey))).to.match(/was retired at .* by a newer key/);
      await first.close();
      await second.close();
    } finally {
      await api.stop();
    }
  });
});
