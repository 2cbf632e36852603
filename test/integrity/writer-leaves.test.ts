import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import canonicalize from 'canonicalize';
import pg from 'pg';
import { eventLeafHash } from '../../src/client/integrity.ts';
import { createDatabaseIfMissing, migrate, migrationsDirectory } from '../../src/db/migrate.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { renderEvent, renderEventDocument } from '../../src/events/eventDocument.ts';
import { EVENT_DOCUMENT, type NewEvent } from '../../src/events/eventStore.ts';
import { documentLeaf } from '../../src/integrity/documentLeaf.ts';
import { checkIntegrity } from '../../src/integrity/integrityCheck.ts';
import { createTestDatabase, databaseUrl, testDatabaseName, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer } from '../support/integrity.ts';
import { merkleTreeHash } from '../support/rfc9162.ts';
import { testLogger } from '../support/service.ts';

const jcs = canonicalize as unknown as (value: unknown) => string;

/** The leaf of a served document by the RFCs alone: SHA-256(0x00 ‖ RFC 8785 form), by a JCS package that is not ours. */
const rfcLeaf = (document: string) =>
  createHash('sha256')
    .update(Buffer.from([0]))
    .update(jcs(JSON.parse(document)))
    .digest('hex');

/** Free-text values that stress the canonical form: every escape JSON has, non-ASCII, JSON inside strings. */
const AWKWARD = [
  '',
  'plain',
  'quote " and backslash \\ and slash /',
  // U+0000 is left out: ingestion refuses it (a text column cannot hold it).
  '\u0001\b\f\n\r\t\u001f \u007f',
  'é ü ß ñ',
  '日本語のテキスト',
  'astral 😀🏥 𝄞',
  'line separators \u2028 \u2029',
  '\ufeffbyte order mark',
  '</script><!--',
  '{"nested":"json \\"quoted\\"","n":1}',
  '["a","b"]',
  '\\u0041 is not an escape here',
  'x'.repeat(5_000),
];

/** A deterministic pseudo-random pick, so that a failure names a reproducible event. */
function picker(seed: number): <T>(values: readonly T[]) => T {
  let state = seed;
  return (values) => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return values[state % values.length]!;
  };
}

function awkwardEvents(count: number, tenantId: string, t0: number): NewEvent[] {
  const pick = picker(18);
  return Array.from({ length: count }, (_, index) =>
    newEvent({
      tenantId,
      occurredAtMs: t0 + index,
      userId: pick(AWKWARD) || 'u',
      userRole: pick(AWKWARD),
      resourceType: pick(AWKWARD),
      resourceId: pick(AWKWARD),
      fieldsAccessed: pick(['', '[]', '["diagnosis"]', '["naïve \\"field\\""]']),
      phiInvolved: pick([true, false]),
      sourceIp: pick(['', '10.1.2.3', '2001:db8::1']),
      userAgent: pick(AWKWARD),
      justification: pick(AWKWARD),
      success: pick([true, false]),
      details: pick(['{}', '{"a":"é\\n"}', '{"emoji":"😀","list":[1,2.5,null,true]}', '{"z":1,"a":{"b":"\\u0000"}}']),
    }),
  );
}

/**
 * Inserts events as a writer that gives no leaf hash would (a pod of the previous release, psql): one
 * statement, so one queue row. `leafHash` overrides what the row claims as its leaf hash.
 */
async function insertWithoutWritePath(
  pool: pg.Pool,
  events: readonly NewEvent[],
  options: { document?: boolean; leafHash?: (event: NewEvent) => Buffer | null } = {},
): Promise<void> {
  const rendered = events.map((event) => renderEventDocument(event, formatTimestamp(event.occurredAtMs)));
  await pool.query(
    `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, fields_accessed,
                         phi_involved, source_ip, user_agent, justification, success, details, document, leaf_hash)
     SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                          $10::boolean[], $11::text[], $12::text[], $13::text[], $14::boolean[], $15::text[], $16::text[], $17::bytea[])`,
    [
      events.map((event) => event.tenantId),
      events.map((event) => new Date(event.occurredAtMs).toISOString()),
      events.map((event) => event.eventId),
      events.map((event) => event.action),
      events.map((event) => event.userId),
      events.map((event) => event.userRole),
      events.map((event) => event.resourceType),
      events.map((event) => event.resourceId),
      events.map((event) => event.fieldsAccessed),
      events.map((event) => event.phiInvolved),
      events.map((event) => event.sourceIp),
      events.map((event) => event.userAgent),
      events.map((event) => event.justification),
      events.map((event) => event.success),
      events.map((event) => event.details),
      options.document === false ? events.map(() => null) : rendered,
      events.map((event) => options.leafHash?.(event) ?? null),
    ],
  );
}

/** The tenant's leaves in leaf order: the leaf hash stored in the tree, and the served document of its event. */
async function storedLeaves(
  pool: pg.Pool | pg.Client,
  tenantId: string,
): Promise<Array<{ eventId: string; leaf: string; served: string }>> {
  const { rows } = await pool.query(
    `SELECT l.event_id::text AS event_id, substring(t.hashes FROM (l.leaf_index % 16)::int * 32 + 1 FOR 32) AS leaf,
            ${EVENT_DOCUMENT} AS document
       FROM merkle_leaves l
       JOIN merkle_tiles t ON t.tenant_id = l.tenant_id AND t.level = 0 AND t.tile_index = l.leaf_index / 16
       LEFT JOIN events e ON e.tenant_id = l.tenant_id AND e.occurred_at = l.event_occurred_at AND e.event_id = l.event_id
      WHERE l.tenant_id = $1 ORDER BY l.leaf_index`,
    [tenantId],
  );
  return rows.map((row: { event_id: string; leaf: Buffer; document: string }) => ({
    eventId: row.event_id,
    leaf: row.leaf.toString('hex'),
    served: row.document,
  }));
}

describe('leaf hashes computed by the write path', function () {
  this.timeout(90_000);

  it('are the RFC 8785 leaf of the rendered document, for every kind of value', () => {
    const events = awkwardEvents(2_000, 'tenant-awkward', Date.parse('2026-11-20T00:00:00.000Z'));
    for (const event of events) {
      const { document, leafHash } = renderEvent(event, formatTimestamp(event.occurredAtMs));
      expect(document).to.equal(renderEventDocument(event, formatTimestamp(event.occurredAtMs)));
      expect(leafHash, document).to.equal(rfcLeaf(document));
      expect(leafHash, document).to.equal(documentLeaf(document).toString('hex'));
      expect(leafHash, document).to.equal(eventLeafHash(document));
    }
  });

  describe('in the store', () => {
    let db: TestDatabase;
    const keys = sealKeyPair();
    const t0 = Date.parse('2026-11-20T08:00:00.000Z');

    beforeEach(async () => {
      db = await createTestDatabase();
    });

    afterEach(async () => {
      await db?.drop();
    });

    it('are stored with each event, carried by its queue row, and appended by the sealer as they are', async () => {
      const events = awkwardEvents(1_500, 'writer', t0);
      await seedEvents(db.url, events);
      const { rows } = await db.pool.query(`SELECT ${EVENT_DOCUMENT} AS document, leaf_hash FROM events e WHERE tenant_id = 'writer'`);
      expect(rows).to.have.length(events.length);
      for (const row of rows as Array<{ document: string; leaf_hash: Buffer }>)
        expect(row.leaf_hash.toString('hex'), row.document).to.equal(rfcLeaf(row.document));
      // Each queue row's hashes line up with its event ids.
      const queue = await db.pool.query(
        `SELECT bool_and(substring(q.leaf_hashes FROM (k.position::int - 1) * 32 + 1 FOR 32) = e.leaf_hash) AS aligned, count(*)::int AS events,
                count(DISTINCT q.id)::int AS rows
           FROM seal_queue q CROSS JOIN LATERAL unnest(q.event_ids, q.event_occurred_at) WITH ORDINALITY AS k(event_id, occurred_at, position)
           JOIN events e ON e.tenant_id = q.tenant_id AND e.event_id = k.event_id AND e.occurred_at = k.occurred_at
          WHERE q.tenant_id = 'writer'`,
      );
      expect(queue.rows[0]).to.deep.equal({ aligned: true, events: 1_500, rows: 2 });
      const sealer = await startTestSealer(db.url, keys.privateKey);
      expect((await sealer.sealNow()).sealed).to.equal(1_500);
      const leaves = await storedLeaves(db.pool, 'writer');
      expect(leaves.map((leaf) => leaf.leaf)).to.deep.equal(leaves.map((leaf) => rfcLeaf(leaf.served)));
      const head = await db.pool.query(`SELECT root_hash FROM tree_heads WHERE tenant_id = 'writer'`);
      expect(head.rows[0].root_hash.toString('hex')).to.equal(
        merkleTreeHash(leaves.map((leaf) => Buffer.from(jcs(JSON.parse(leaf.served))))).toString('hex'),
      );
      expect((await checkIntegrity(sealer.db, { tenantId: 'writer', sealIntervalMs: 10_000 }))[0]!.problems).to.deep.equal([]);
      await sealer.close();
    });

    it('seals the events of writers that give no hash, in order with those that do', async () => {
      const tenantId = 'mixed';
      const batches = [0, 1, 2, 3, 4].map((batch) => awkwardEvents(40, tenantId, t0 + batch * 1_000));
      await seedEvents(db.url, batches[0]!);
      // A pod of the previous release: a document, no hash.
      await insertWithoutWritePath(db.pool, batches[1]!);
      // A row from before events kept their document, as psql might insert it.
      await insertWithoutWritePath(db.pool, batches[2]!, { document: false });
      // A hash of the wrong length is no hash: the statement's events are hashed by the sealer.
      await insertWithoutWritePath(db.pool, batches[3]!, {
        leafHash: (event) =>
          event === batches[3]![7] ? Buffer.from([1, 2, 3]) : documentLeaf(renderEventDocument(event, formatTimestamp(event.occurredAtMs))),
      });
      await seedEvents(db.url, batches[4]!);
      const queue = await db.pool.query(`SELECT leaf_hashes IS NOT NULL AS hashed FROM seal_queue WHERE tenant_id = $1 ORDER BY id`, [
        tenantId,
      ]);
      expect(queue.rows.map((row: { hashed: boolean }) => row.hashed)).to.deep.equal([true, false, false, false, true]);
      const sealer = await startTestSealer(db.url, keys.privateKey);
      expect((await sealer.sealNow()).sealed).to.equal(200);
      const leaves = await storedLeaves(db.pool, tenantId);
      expect(leaves.map((leaf) => leaf.eventId)).to.deep.equal(batches.flat().map((event) => event.eventId));
      expect(leaves.map((leaf) => leaf.leaf)).to.deep.equal(leaves.map((leaf) => rfcLeaf(leaf.served)));
      expect((await checkIntegrity(sealer.db, { tenantId, sealIntervalMs: 10_000 }))[0]!.problems).to.deep.equal([]);
      await sealer.close();
    });

    it('lets the integrity check name an event whose writer gave a wrong hash', async () => {
      const tenantId = 'wrong-writer';
      const honest = awkwardEvents(30, tenantId, t0);
      await seedEvents(db.url, honest.slice(0, 10));
      const [victim, other] = [honest[10]!, honest[11]!];
      const documentOf = (event: NewEvent) => renderEventDocument(event, formatTimestamp(event.occurredAtMs));
      // A writer that claims another document's hash for this one (a bug, or a writer lying about what it stored).
      await insertWithoutWritePath(db.pool, honest.slice(10, 20), {
        leafHash: (event) => documentLeaf(event === victim ? documentOf(other) : documentOf(event)),
      });
      await seedEvents(db.url, honest.slice(20));
      const sealer = await startTestSealer(db.url, keys.privateKey);
      expect((await sealer.sealNow()).sealed).to.equal(30);
      // The tree holds what the writer claimed: a customer hashing the served event gets another leaf...
      const leaves = await storedLeaves(db.pool, tenantId);
      const mismatched = leaves.filter((leaf) => leaf.leaf !== rfcLeaf(leaf.served)).map((leaf) => leaf.eventId);
      expect(mismatched).to.deep.equal([victim.eventId]);
      // ...and the server-side audit, which recomputes every leaf from the stored document, names that event alone.
      const problems = (await checkIntegrity(sealer.db, { tenantId, sealIntervalMs: 10_000 }))[0]!.problems;
      expect(problems.map((problem) => [problem.kind, problem.eventId])).to.deep.equal([['leaf_mismatch', victim.eventId]]);
      await sealer.close();
    });

    it('seals an event a superuser deleted before its turn, and the integrity check names it', async () => {
      const tenantId = 'deleted-early';
      const events = awkwardEvents(20, tenantId, t0);
      await seedEvents(db.url, events);
      const client = await db.pool.connect();
      try {
        // As a superuser would: with the append-only triggers off.
        await client.query('SET session_replication_role = replica');
        await client.query('DELETE FROM events WHERE tenant_id = $1 AND event_id = $2', [tenantId, events[4]!.eventId]);
      } finally {
        await client.query('RESET session_replication_role');
        client.release();
      }
      const sealer = await startTestSealer(db.url, keys.privateKey);
      // The leaf is the writer's hash: the deletion cannot keep the event out of the tree.
      expect((await sealer.sealNow()).sealed).to.equal(20);
      const problems = (await checkIntegrity(sealer.db, { tenantId, sealIntervalMs: 10_000 }))[0]!.problems;
      expect(problems.map((problem) => [problem.kind, problem.eventId])).to.deep.equal([['event_missing', events[4]!.eventId]]);
      await sealer.close();
    });
  });

  describe('migration 012 on a database written before it', () => {
    const name = testDatabaseName('leaf_migration');
    const url = databaseUrl(name);
    let before: string;

    after(async () => {
      const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
      if (before) rmSync(before, { recursive: true, force: true });
    });

    it('keeps the events and queue rows stored before it, and the sealer hashes those from their documents', async () => {
      // The schema as the previous release left it: migrations up to 011.
      before = mkdtempSync(join(tmpdir(), 'audit-migrations-'));
      for (const file of readdirSync(migrationsDirectory).filter((file) => file.endsWith('.sql') && Number(file.slice(0, 3)) < 12)) {
        copyFileSync(join(migrationsDirectory, file), join(before, file));
      }
      await createDatabaseIfMissing(url);
      await migrate(url, testLogger(), before);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const t0 = Date.now() - 60_000;
        const old = awkwardEvents(60, 'upgraded', t0);
        const documentOf = (event: NewEvent) => renderEventDocument(event, formatTimestamp(event.occurredAtMs));
        // The previous release's write path: the document, no leaf hash (the column does not exist yet).
        for (const slice of [old.slice(0, 25), old.slice(25)]) {
          await client.query(
            `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, fields_accessed,
                                 phi_involved, source_ip, user_agent, justification, success, details, document)
             SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                                  $10::boolean[], $11::text[], $12::text[], $13::text[], $14::boolean[], $15::text[], $16::text[])`,
            [
              slice.map((e) => e.tenantId),
              slice.map((e) => new Date(e.occurredAtMs).toISOString()),
              slice.map((e) => e.eventId),
              slice.map((e) => e.action),
              slice.map((e) => e.userId),
              slice.map((e) => e.userRole),
              slice.map((e) => e.resourceType),
              slice.map((e) => e.resourceId),
              slice.map((e) => e.fieldsAccessed),
              slice.map((e) => e.phiInvolved),
              slice.map((e) => e.sourceIp),
              slice.map((e) => e.userAgent),
              slice.map((e) => e.justification),
              slice.map((e) => e.success),
              slice.map((e) => e.details),
              slice.map(documentOf),
            ],
          );
        }
        // 012 first, then whatever later migrations there are.
        expect((await migrate(url, testLogger())).applied[0]).to.equal('012_writer_leaf_hashes.sql');
        const queued = await client.query(`SELECT leaf_hashes FROM seal_queue WHERE tenant_id = 'upgraded' ORDER BY id`);
        expect(queued.rows.map((row: { leaf_hashes: Buffer | null }) => row.leaf_hashes)).to.deep.equal([null, null]);
        const fresh = awkwardEvents(30, 'upgraded', t0 + 1_000);
        await seedEvents(url, fresh);
        const sealer = await startTestSealer(url, sealKeyPair().privateKey);
        expect((await sealer.sealNow()).sealed).to.equal(90);
        const leaves = await storedLeaves(client, 'upgraded');
        expect(leaves.map((leaf) => leaf.eventId)).to.deep.equal([...old, ...fresh].map((event) => event.eventId));
        expect(leaves.map((leaf) => leaf.leaf)).to.deep.equal(leaves.map((leaf) => rfcLeaf(leaf.served)));
        const stored = await client.query(`SELECT count(leaf_hash)::int AS hashed FROM events WHERE tenant_id = 'upgraded'`);
        expect(stored.rows[0].hashed).to.equal(30);
        expect((await checkIntegrity(sealer.db, { tenantId: 'upgraded', sealIntervalMs: 10_000 }))[0]!.problems).to.deep.equal([]);
        await sealer.close();
      } finally {
        await client.end();
      }
    });
  });
});
