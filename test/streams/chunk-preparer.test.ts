import { gunzipSync } from 'node:zlib';
import { expect } from 'chai';
import { copyOutBinary } from '../../src/db/binaryCopy.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { DOCUMENT_PARTS, EVENT_DOCUMENT_VERSION } from '../../src/events/eventDocument.ts';
import { EVENT_DOCUMENT } from '../../src/events/eventStore.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { type ChunkJob, prepareChunk } from '../../src/streams/chunkPreparation.ts';
import { ChunkPreparer } from '../../src/streams/chunkPreparer.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { testLogger } from '../support/service.ts';

/**
 * A streams process puts its batches together on a thread of its own (ChunkPreparer): what comes back must be
 * what the same job gives on the calling thread, errors must reach the caller, and the bytes handed over must
 * not take anything else with them.
 */
describe('chunks put together on the preparer thread', function () {
  this.timeout(30_000);
  let database: TestDatabase;
  let db: Database;
  let preparer: ChunkPreparer;
  /** 600 events as a chunk's rows (a leaf per event, in time order), and their served documents. */
  let rows: Buffer;
  let served: string[];

  before(async () => {
    database = await createTestDatabase();
    db = new Database({ url: database.url, poolSize: 2, applicationName: 'chunk preparer test', log: testLogger() });
    const base = Date.parse('2026-11-02T08:00:00.000Z');
    await new EventWriter(db, WEBHOOK_FAN_OUT).write(
      Array.from({ length: 600 }, (_, index) =>
        newEvent({ tenantId: 'prep', occurredAtMs: base + index, details: `{"note":"ünïcødé ${index}"}` }),
      ),
      'test',
    );
    const order = 'ORDER BY e.occurred_at, e.event_id';
    rows = await copyOutBinary(db, `SELECT (row_number() OVER (${order}) - 1)::int8, ${DOCUMENT_PARTS} FROM events e ${order}`);
    served = (await db.query<{ document: string }>(`SELECT ${EVENT_DOCUMENT} AS document FROM events e ${order}`)).rows.map(
      (row) => row.document,
    );
    expect(served[0]).to.contain(`"event_id":`);
    expect(EVENT_DOCUMENT_VERSION).to.equal(1);
    preparer = new ChunkPreparer();
  });

  after(async () => {
    await preparer?.close();
    await db?.close();
    await database?.drop();
  });

  const job = (overrides: Partial<ChunkJob> = {}): ChunkJob => ({
    rows: Buffer.from(rows),
    destination: { type: 'splunk_hec', url: 'http://127.0.0.1:9', token: 'not sent' },
    format: 'native',
    ocsfVersion: '1.7.0',
    span: { streamId: 'str_prep', tenantId: 'prep', firstLeaf: 0, lastLeaf: 599 },
    limits: { maxItems: 10_000, maxBytes: 100_000 },
    head: undefined,
    ...overrides,
  });

  it('gives the batches the calling thread gives: same leaves, same bytes, every event once as the API serves it', async () => {
    for (const format of ['native', 'ocsf'] as const) {
      const here = prepareChunk(job({ format }));
      const there = await preparer.prepare(job({ format }));
      expect(here.length).to.be.greaterThan(2);
      expect(there.map(({ encoded, events }) => [encoded.firstLeaf, encoded.lastLeaf, events])).to.deep.equal(
        here.map(({ encoded, events }) => [encoded.firstLeaf, encoded.lastLeaf, events]),
      );
      const texts = there.map(({ encoded }) => gunzipSync(encoded.body).toString('utf8'));
      expect(texts).to.deep.equal(here.map(({ encoded }) => gunzipSync(encoded.body).toString('utf8')));
      if (format === 'native') {
        const events = texts.flatMap((text) => text.split('\n').map((line) => JSON.parse(line).event));
        expect(events.map(({ leaf_index, ...document }) => [leaf_index, JSON.stringify(document)])).to.deep.equal(
          served.map((document, leaf) => [leaf, document]),
        );
      }
    }
  });

  it('takes the bytes it is given without taking the Buffers that share their memory', async () => {
    // A small Buffer is a slice of Node's shared pool: handing its ArrayBuffer over would empty its neighbours.
    const neighbour = Buffer.from('a neighbour in the pool');
    const pooled = Buffer.from(rows.subarray(0, 19 + 2));
    expect(pooled.buffer).to.equal(neighbour.buffer);
    // The chunk's first row cut short: the thread is given the bytes, and says so.
    const refused = await preparer.prepare(job({ rows: pooled })).catch((error: Error) => error);
    expect((refused as Error).message).to.match(/binary COPY (row cut short|ended without its trailer)/);
    expect(neighbour.toString()).to.equal('a neighbour in the pool');
  });

  it('rejects a job its thread cannot do with the thread’s error, and does the next one', async () => {
    const refused = await preparer.prepare(job({ rows: Buffer.from('not a COPY') })).catch((error: Error) => error);
    expect((refused as Error).message).to.equal('not the binary COPY format');
    expect(await preparer.prepare(job())).to.have.length.greaterThan(2);
  });

  it('refuses jobs once closed, and answers those in progress', async () => {
    const closing = new ChunkPreparer();
    const inProgress = closing.prepare(job()).catch((error: Error) => error);
    await closing.close();
    expect(((await inProgress) as Error).message).to.equal('the chunk preparer is closed');
    expect(((await closing.prepare(job()).catch((error: Error) => error)) as Error).message).to.equal('the chunk preparer is closed');
  });
});
