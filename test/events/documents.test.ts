import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { CursorCodec } from '../../src/events/cursor.ts';
import { EventReader } from '../../src/events/eventReader.ts';
import { BinaryRows, copyOutBinary, sqlLiteral } from '../../src/db/binaryCopy.ts';
import {
  DOCUMENT_PARTS,
  documentOfParts,
  type DocumentParts,
  EVENT_DOCUMENT_VERSION,
  EVENT_JSON,
  renderEventDocument,
} from '../../src/events/eventDocument.ts';
import { compactDocumentLength, compactTimestampMs, writeCompactDocument } from '../../src/events/compactDocumentBytes.ts';
import { EVENT_DOCUMENT, exportQuery } from '../../src/events/eventStore.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { TEST_PEPPER, testLogger } from '../support/service.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';

/** Text that JSON and Postgres array syntax both give a meaning to, and characters outside ASCII. */
const AWKWARD =
  'quote " backslash \\ brace { } comma , tab \t newline \n nul-adjacent \u0001 \u001f del \u007f' +
  ' line-separator \u2028 html </script> ünïcødé 🩺 NULL';

describe('stored event documents', () => {
  let database: TestDatabase;
  let db: Database;
  let reader: EventReader;
  const T0 = Date.parse('2026-10-05T08:00:00.000Z');
  const written = newEvent({
    tenantId: 'doc',
    occurredAtMs: T0 + 1,
    userId: AWKWARD,
    userRole: AWKWARD,
    resourceType: AWKWARD,
    resourceId: AWKWARD,
    fieldsAccessed: JSON.stringify([AWKWARD, 'diagnosis']),
    userAgent: AWKWARD,
    justification: AWKWARD,
    sourceIp: '2001:db8::1',
    details: JSON.stringify({ note: AWKWARD, nested: { list: [1, 'two', null] } }),
    success: false,
  });
  // The same fields under another id, stored as a pod predating migration 005 would: no document.
  const legacy = { ...written, eventId: '0198f3a0-0000-7000-8000-000000000001', occurredAtMs: T0 };

  before(async () => {
    database = await createTestDatabase();
    db = new Database({ url: database.url, poolSize: 2, applicationName: 'documents test', log: testLogger() });
    await new EventWriter(db, WEBHOOK_FAN_OUT).write([written], 'test');
    await database.pool.query(
      `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                           fields_accessed, phi_involved, source_ip, user_agent, justification, success, details)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
      [
        legacy.tenantId,
        new Date(legacy.occurredAtMs).toISOString(),
        legacy.eventId,
        legacy.action,
        legacy.userId,
        legacy.userRole,
        legacy.resourceType,
        legacy.resourceId,
        legacy.fieldsAccessed,
        legacy.phiInvolved,
        legacy.sourceIp,
        legacy.userAgent,
        legacy.justification,
        legacy.success,
        legacy.details,
      ],
    );
    reader = new EventReader(db, new CursorCodec(TEST_PEPPER));
  });

  after(async () => {
    await db?.close();
    await database?.drop();
  });

  it('stores each event once, its values, and serves byte for byte the document the write path rendered', async () => {
    const { rows } = await database.pool.query(
      `SELECT document, document_values, ${EVENT_DOCUMENT} AS served,
              num_nonnulls(user_role, fields_accessed, source_ip, user_agent, justification, success, details) AS content_columns
         FROM events e WHERE event_id = $1`,
      [written.eventId],
    );
    expect(rows[0].document).to.equal(null);
    expect(rows[0].content_columns).to.equal(0);
    // The id, action, PHI flag and tenant come from their columns.
    expect(rows[0].document_values.split('\u001f')).to.have.length(11);
    expect(rows[0].served).to.equal(renderEventDocument(written, '2026-10-05T08:00:00.001Z'));
    // The reads that put the document together in Node serve the bytes Postgres' format() does.
    expect(await reader.findOne('doc', written.eventId)).to.equal(rows[0].served);
    expect(JSON.parse(rows[0].served)).to.deep.include({ user_id: AWKWARD, timestamp: '2026-10-05T08:00:00.001Z', success: false });
  });

  it('stores the full form while the database asks for it, serving the same bytes', async () => {
    const full = { ...written, tenantId: 'doc-full', eventId: '0198f3a0-0000-7000-8000-000000000003' };
    await database.pool.query(`UPDATE event_storage SET form = 'full'`);
    try {
      await new EventWriter(db, WEBHOOK_FAN_OUT).write([full], 'test');
    } finally {
      await database.pool.query(`UPDATE event_storage SET form = 'compact'`);
    }
    const { rows } = await database.pool.query(
      `SELECT document, document_values, ${EVENT_JSON} AS rendered, ${EVENT_DOCUMENT} AS served FROM events e WHERE event_id = $1`,
      [full.eventId],
    );
    expect(rows[0].document_values).to.equal(null);
    expect(rows[0].document).to.equal(rows[0].rendered);
    expect(rows[0].served.replace(full.eventId, written.eventId).replace('doc-full', 'doc')).to.equal(
      await reader.findOne('doc', written.eventId),
    );
  });

  it('serves a row stored without a document exactly as one stored with it', async () => {
    const withDocument = await reader.findOne('doc', written.eventId);
    const withoutDocument = await reader.findOne('doc', legacy.eventId);
    const asStored = (text: string) => text.replace(legacy.eventId, written.eventId).replace('08:00:00.000Z', '08:00:00.001Z');
    expect(asStored(withoutDocument)).to.equal(withDocument);
  });

  it('writes version 1 documents byte for byte as they were written before the shape had one definition', async () => {
    // Stored documents are compared and hashed as bytes: this text must never change for version 1.
    const golden = String.raw`{"event_id":"0198f3a0-0000-7000-8000-0000000000aa","timestamp":"2026-10-05T08:00:00.123Z","action":"phi.read","user_id":"dr \"who\" \\ ü","user_role":"clinician","resource_type":"patient_record","resource_id":"p-1\n2","fields_accessed":"[\"diagnosis\"]","phi_involved":true,"tenant_id":"golden","source_ip":"2001:db8::1","user_agent":"agent\t1\u0001","justification":"","success":false,"details":"{\"ward\":\"3B\"}"}`;
    const event = newEvent({
      tenantId: 'golden',
      eventId: '0198f3a0-0000-7000-8000-0000000000aa',
      occurredAtMs: Date.parse('2026-10-05T08:00:00.123Z'),
      userId: 'dr "who" \\ ü',
      resourceType: 'patient_record',
      resourceId: 'p-1\n2',
      sourceIp: '2001:db8::1',
      userAgent: 'agent\t1\u0001',
      success: false,
      details: '{"ward":"3B"}',
    });
    expect(EVENT_DOCUMENT_VERSION).to.equal(1);
    expect(renderEventDocument(event, '2026-10-05T08:00:00.123Z')).to.equal(golden);
    await new EventWriter(db, WEBHOOK_FAN_OUT).write([event], 'test');
    const { rows } = await database.pool.query(`SELECT ${EVENT_DOCUMENT} AS served, document_version FROM events e WHERE event_id = $1`, [
      event.eventId,
    ]);
    expect(rows[0]).to.deep.equal({ served: golden, document_version: 1 });
  });

  it('records the version of every document, 1 for rows written before there were versions', async () => {
    const { rows } = await database.pool.query(
      'SELECT event_id, document_version FROM events WHERE event_id = ANY($1::uuid[]) ORDER BY occurred_at',
      [[written.eventId, legacy.eventId]],
    );
    expect(rows).to.deep.equal([
      { event_id: legacy.eventId, document_version: 1 },
      { event_id: written.eventId, document_version: EVENT_DOCUMENT_VERSION },
    ]);
  });

  it('serves a stored document as it was written, whatever its version', async () => {
    // A row as a future version 2 would store it: a field more, after the others. Served as sealed, never re-rendered.
    const future = { ...written, tenantId: 'doc-v2', eventId: '0198f3a0-0000-7000-8000-000000000002' };
    const document = `${renderEventDocument(future, '2026-10-05T08:00:00.001Z').slice(0, -1)},"sealed_by":"a later version"}`;
    await database.pool.query(
      `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                           fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, document, document_version)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 2)`,
      [
        future.tenantId,
        new Date(future.occurredAtMs).toISOString(),
        future.eventId,
        future.action,
        future.userId,
        future.userRole,
        future.resourceType,
        future.resourceId,
        future.fieldsAccessed,
        future.phiInvolved,
        future.sourceIp,
        future.userAgent,
        future.justification,
        future.success,
        future.details,
        document,
      ],
    );
    expect(await reader.findOne('doc-v2', future.eventId)).to.equal(document);
    const page = await reader.listPage({ tenantId: 'doc-v2', filters: {}, limit: 10, cursor: undefined });
    expect(page.startsWith(`{"events":[${document}],`)).to.equal(true);
  });

  it('lists, looks up and exports every kind of row as Postgres serves it', async () => {
    // Compact, full, without a document, of a later version: Node's document of each against EVENT_DOCUMENT's.
    const { rows } = await database.pool.query<{ tenant_id: string; event_id: string; served: string }>(
      `SELECT tenant_id, event_id, ${EVENT_DOCUMENT} AS served FROM events e ORDER BY tenant_id, occurred_at DESC, event_id DESC`,
    );
    expect(rows.length).to.be.at.least(4);
    for (const row of rows) expect(await reader.findOne(row.tenant_id, row.event_id)).to.equal(row.served);
    for (const tenant of new Set(rows.map((row) => row.tenant_id))) {
      const served = rows.filter((row) => row.tenant_id === tenant).map((row) => row.served);
      const page = await reader.listPage({ tenantId: tenant, filters: {}, limit: 100, cursor: undefined });
      expect(page.startsWith(`{"events":[${served.join(',')}],`)).to.equal(true);
      const exported = await database.pool.query({ ...exportQuery(tenant, {}, {}), rowMode: 'array' });
      expect((exported.rows as DocumentParts[]).map(documentOfParts)).to.deep.equal(served);
    }
  });

  it('puts each compact row together from its binary COPY bytes, byte for byte as Postgres serves it', async () => {
    // Every kind of row (compact, full, without a document, of a later version), read as a stream reads them.
    const rows = new BinaryRows(await copyOutBinary(db, `SELECT ${EVENT_DOCUMENT}, ${DOCUMENT_PARTS} FROM events e`));
    let compact = 0;
    for (let index = 0; index < rows.rowCount; index += 1) {
      rows.select(index);
      const served = rows.text(0)!;
      const length = compactDocumentLength(rows, 1);
      if (length === undefined) {
        expect(rows.text(1)).to.equal(served);
        continue;
      }
      compact += 1;
      // Written where the caller says, without the final brace (a stream appends a member there), and nothing past it.
      const target = Buffer.alloc(length + 20, '#');
      expect(writeCompactDocument(rows, 1, target, 10)).to.equal(10 + length);
      expect(target.toString('utf8')).to.equal(`${'#'.repeat(10)}${served.slice(0, -1)}${'#'.repeat(10)}`);
      expect(Buffer.byteLength(served)).to.equal(length + 1);
      expect(compactTimestampMs(rows, 1)).to.equal(Date.parse(JSON.parse(served).timestamp));
    }
    expect(rows.rowCount).to.be.at.least(4);
    expect(compact).to.be.at.least(2);
  });

  it('refuses a compact row whose values do not fit the shape, rather than serving a shifted document', async () => {
    const values = (await database.pool.query(`SELECT document_values FROM events WHERE event_id = $1`, [written.eventId])).rows[0]
      .document_values as string;
    for (const stored of [`${values}\u001fextra`, values.split('\u001f').slice(1).join('\u001f')]) {
      const rows = new BinaryRows(
        await copyOutBinary(
          db,
          `SELECT NULL::text, ${sqlLiteral(stored)}::text, e.event_id, e.action, e.phi_involved, e.tenant_id FROM events e WHERE e.event_id = ${sqlLiteral(written.eventId)}`,
        ),
      );
      rows.select(0);
      const length = compactDocumentLength(rows, 0)!;
      expect(() => writeCompactDocument(rows, 0, Buffer.alloc(length + 100), 0)).to.throw(/stores \d+ values, not 11/);
    }
  });

  it('lists, pages and exports both kinds of row', async () => {
    const first = JSON.parse(await reader.listPage({ tenantId: 'doc', filters: {}, limit: 1, cursor: undefined }));
    expect(first.events.map((event: { event_id: string }) => event.event_id)).to.deep.equal([written.eventId]);
    const second = JSON.parse(await reader.listPage({ tenantId: 'doc', filters: {}, limit: 1, cursor: first.page.next_cursor }));
    expect(second.events.map((event: { event_id: string }) => event.event_id)).to.deep.equal([legacy.eventId]);
    expect(second.page.has_more).to.equal(false);
    const exported = await database.pool.query({ ...exportQuery('doc', {}, {}), rowMode: 'array' });
    expect((exported.rows as DocumentParts[]).map(documentOfParts)).to.deep.equal([
      await reader.findOne('doc', written.eventId),
      await reader.findOne('doc', legacy.eventId),
    ]);
  });
});
