import { expect } from 'chai';
import pg from 'pg';
import { BinaryRows } from '../../src/db/binaryCopy.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EVENT_DOCUMENT } from '../../src/events/eventStore.ts';
import {
  copyLeafDocuments,
  documentOfLeafRow,
  leafChunkLiterals,
  leafChunkQuery,
  leafChunkValues,
  type StreamEventFilter,
} from '../../src/events/leafChunks.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { redactEvent } from '../../src/lifecycle/redactions.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { sealKeyPair, startTestSealer } from '../support/integrity.ts';
import { testLogger } from '../support/service.ts';

/**
 * A log stream reads its tenant's trail a chunk of leaves at a time (copyLeafDocuments). The statement hashes
 * the events of the chunk's window of time when the window holds few others, and looks each key up otherwise:
 * either way a chunk is exactly its leaves' events, in leaf order, wherever their months and whenever they were
 * sealed.
 */
describe("a chunk of a tenant's leaves", () => {
  const TENANT = 'chunks';
  const DAY_MS = 86_400_000;
  const now = new Date();
  const MONTH_START = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const everything: StreamEventFilter = { actionPrefixes: [], phiInvolved: undefined };
  let database: TestDatabase;
  let db: Database;
  /** Each leaf's event id, in leaf order (the tree's own record, merkle_leaves). */
  let leaves: string[];
  /** Each event's served document, and its action and PHI flag for the filters. */
  const events = new Map<string, { document: string; action: string; phiInvolved: boolean }>();
  /** The leaf of the event two years old. */
  let oldLeaf: number;

  before(async () => {
    database = await createTestDatabase();
    // One connection: a COPY that left it unusable would fail the next read.
    db = new Database({ url: database.url, poolSize: 1, applicationName: 'leaf chunks test', log: testLogger() });
    const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
    const sealer = await startTestSealer(database.url, sealKeyPair().privateKey);
    const sealAll = async () => {
      while ((await sealer.sealNow()).sealed > 0);
    };
    const event = (occurredAtMs: number, index: number) =>
      newEvent({
        tenantId: TENANT,
        occurredAtMs,
        resourceId: `r-${index}`,
        action: index % 3 === 0 ? 'phi.read' : 'record.update',
        phiInvolved: index % 2 === 0,
        justification: index === 7 ? 'care' : '',
      });
    try {
      // Two statements over the same 2.4 s across the start of this month (two partitions), sealed one after
      // the other, their instants interleaved: each one's window holds the other's events too.
      await writer.write(
        Array.from({ length: 1200 }, (_, index) => event(MONTH_START - 1200 + 2 * index, index)),
        'test',
      );
      await sealAll();
      await writer.write(
        Array.from({ length: 1200 }, (_, index) => event(MONTH_START - 1199 + 2 * index, index)),
        'test',
      );
      await sealAll();
      // Late events sealed after them: a third of a statement from three months ago, one from two years ago.
      const late = Array.from({ length: 600 }, (_, index) =>
        event(index % 3 === 0 ? MONTH_START - 90 * DAY_MS + index : MONTH_START + 5000 + index, index),
      );
      late[301] = event(MONTH_START - 730 * DAY_MS, 301);
      await writer.write(late, 'test');
      await sealAll();
      const { rows: redactable } = await database.pool.query<{ event_id: string }>(
        `SELECT event_id::text FROM events WHERE tenant_id = $1 AND resource_id = 'r-7' ORDER BY occurred_at LIMIT 1`,
        [TENANT],
      );
      await redactEvent(
        writer,
        { tenantId: TENANT, eventId: redactable[0]!.event_id, fields: ['justification'], reference: 'DSR-9' },
        { userId: 'dpo', userRole: 'operator' },
      );
      await sealAll();
      // Unsealed events at the very instants of sealed ones: in the first windows, in no leaf.
      await writer.write(
        Array.from({ length: 300 }, (_, index) => event(MONTH_START - 1200 + 2 * index, index)),
        'test',
      );
    } finally {
      await sealer.close();
    }
    const tree = await database.pool.query<{ event_id: string; occurred_at: Date }>(
      `SELECT event_id::text, event_occurred_at AS occurred_at FROM merkle_leaves WHERE tenant_id = $1 ORDER BY leaf_index`,
      [TENANT],
    );
    leaves = tree.rows.map((row) => row.event_id);
    oldLeaf = tree.rows.findIndex((row) => row.occurred_at.getTime() === MONTH_START - 730 * DAY_MS);
    const stored = await database.pool.query<{ event_id: string; document: string; action: string; phi_involved: boolean }>(
      `SELECT e.event_id::text, ${EVENT_DOCUMENT} AS document, e.action, e.phi_involved FROM events e WHERE e.tenant_id = $1`,
      [TENANT],
    );
    for (const row of stored.rows) events.set(row.event_id, { document: row.document, action: row.action, phiInvolved: row.phi_involved });
  });

  after(async () => {
    await db?.close();
    await database?.drop();
  });

  /** A chunk as a stream reads it: its rows' leaves and served documents, in leaf order. */
  async function documentsOfLeaves(tenantId: string, fromLeaf: number, maxLeaves: number, filter: StreamEventFilter) {
    const rows = new BinaryRows(await copyLeafDocuments(db, tenantId, fromLeaf, maxLeaves, filter));
    return Array.from({ length: rows.rowCount }, (_, index) => {
      rows.select(index);
      return { leaf: rows.integer(0), document: documentOfLeafRow(rows) };
    }).sort((a, b) => a.leaf - b.leaf);
  }

  /** What a chunk must be: its leaves' events that the filter matches, from the tree and the events apart. */
  function expectedChunk(fromLeaf: number, maxLeaves: number, filter: StreamEventFilter) {
    const matches = (action: string) =>
      filter.actionPrefixes.length === 0 ||
      filter.actionPrefixes.some((prefix) => action === prefix || action.startsWith(prefix.endsWith('.') ? prefix : `${prefix}.`));
    return leaves.slice(fromLeaf, fromLeaf + maxLeaves).flatMap((eventId, index) => {
      const event = events.get(eventId)!;
      if (!matches(event.action) || (filter.phiInvolved !== undefined && event.phiInvolved !== filter.phiInvolved)) return [];
      return [{ leaf: fromLeaf + index, document: event.document }];
    });
  }

  it('holds the setting the other cases rely on: 3,001 leaves over four months, one redacted, unsealed events besides', () => {
    expect(leaves).to.have.length(3001);
    expect(new Set(leaves).size).to.equal(3001);
    expect(oldLeaf).to.be.within(2400, 2999);
    expect([...events.values()].filter((event) => event.document.includes('"redaction"'))).to.have.length(1);
    expect(events.size).to.equal(3001 + 300);
  });

  it('is exactly its leaves, in leaf order, across partitions and late events, chunk after chunk', async () => {
    // Chunks of 1,500 and the whole tree take the hashed window, with other events and unsealed ones in it;
    // the others look keys up.
    for (const size of [1000, 777, 1200, 1500, 3001]) {
      const read = [];
      for (let from = 0; from < leaves.length; from += size) read.push(...(await documentsOfLeaves(TENANT, from, size, everything)));
      expect(read, `chunks of ${size}`).to.deep.equal(expectedChunk(0, leaves.length, everything));
    }
  });

  it('starts and ends anywhere, past the tree too, with the action and PHI filters', async () => {
    const filters: StreamEventFilter[] = [
      everything,
      { actionPrefixes: ['phi'], phiInvolved: undefined },
      { actionPrefixes: ['record.update', 'phi.'], phiInvolved: true },
      { actionPrefixes: [], phiInvolved: false },
      { actionPrefixes: ['admin'], phiInvolved: undefined },
    ];
    for (const filter of filters) {
      for (const [from, max] of [
        [1, 1],
        [0, 1500],
        [0, 3001],
        [999, 1300],
        [1201, 1199],
        [oldLeaf, 1],
        [oldLeaf - 10, 20],
        [2990, 500],
        [3001, 100],
      ] as const) {
        expect(await documentsOfLeaves(TENANT, from, max, filter), `${JSON.stringify(filter)} from ${from}, ${max}`).to.deep.equal(
          expectedChunk(from, max, filter),
        );
      }
    }
  });

  it("hashes a window that holds few other events, and looks each key up in one that holds more than the chunk's twice over", async () => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      await client.query(`PREPARE chunk (text, int8, int8, text[], boolean) AS ${leafChunkQuery('e.event_id')}`);
      const execute = (from: number, max: number) =>
        `EXECUTE chunk(${leafChunkValues(TENANT, from, max, everything)
          .map((value) => (value === null ? 'NULL' : pg.escapeLiteral(String(value))))
          .join(', ')})`;
      for (let round = 0; round < 6; round += 1) await client.query(execute(round * 100, 100));
      /** The rows each kind of join returned, for the statement in `text`. */
      const joined = async (text: string) => {
        const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`);
        const totals = new Map<string, number>();
        const visit = (node: { 'Node Type': string; 'Actual Rows': number; 'Actual Loops': number; Plans?: unknown[] }) => {
          totals.set(node['Node Type'], (totals.get(node['Node Type']) ?? 0) + node['Actual Rows'] * node['Actual Loops']);
          for (const child of node.Plans ?? []) visit(child as typeof node);
        };
        visit(rows[0]['QUERY PLAN'][0].Plan);
        return { hash: totals.get('Hash Join') ?? 0, nestedLoop: totals.get('Nested Loop') ?? 0 };
      };
      // The generic plan of the prepared statement, and the plan of the statement with literals (as a stream's
      // COPY sends it), planned for its values.
      const statements = [
        (from: number, max: number) => execute(from, max),
        (from: number, max: number) => leafChunkQuery('e.event_id', leafChunkLiterals(TENANT, from, max, everything)),
      ];
      for (const statement of statements) {
        // Leaves of both statements over the month's start: a window of 2,700 events (the rest of the second
        // statement's and the unsealed among them) for 1,500 leaves.
        expect(await joined(statement(0, 1500))).to.include({ hash: 1500 });
        // Past the event two years old, the window holds every event of the tenant.
        const sparse = await joined(statement(oldLeaf - 10, 20));
        expect(sparse.hash).to.equal(0);
        expect(sparse.nestedLoop).to.be.at.least(20);
      }
      const { rows } = await client.query(`SELECT generic_plans FROM pg_prepared_statements WHERE name = 'chunk'`);
      expect(Number(rows[0].generic_plans)).to.be.at.least(2);
    } finally {
      await client.end();
    }
  });
});
