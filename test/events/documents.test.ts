import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { CursorCodec } from '../../src/events/cursor.ts';
import { EventReader } from '../../src/events/eventReader.ts';
import { EVENT_JSON, exportQuery } from '../../src/events/eventStore.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/events.ts';
import { TEST_PEPPER, testLogger } from '../support/service.ts';

/** Text that JSON and Postgres array syntax both give a meaning to, and characters outside ASCII. */
const AWKWARD = 'quote " backslash \\ brace { } comma , tab \t newline \n nul-adjacent \u0001 \u001f del \u007f'
  + ' line-separator \u2028 html </script> ünïcødé 🩺 NULL';

describe('stored event documents', () => {
  let database: TestDatabase;
  let db: Database;
  let reader: EventReader;
  const T0 = Date.parse('2026-10-05T08:00:00.000Z');
  const written = newEvent({
    tenantId: 'doc', occurredAtMs: T0 + 1, userId: AWKWARD, userRole: AWKWARD, resourceType: AWKWARD, resourceId: AWKWARD,
    fieldsAccessed: JSON.stringify([AWKWARD, 'diagnosis']), userAgent: AWKWARD, justification: AWKWARD, sourceIp: '2001:db8::1',
    details: JSON.stringify({ note: AWKWARD, nested: { list: [1, 'two', null] } }), success: false,
  });
  // The same fields under another id, stored as a pod predating migration 005 would: no document.
  const legacy = { ...written, eventId: '0198f3a0-0000-7000-8000-000000000001', occurredAtMs: T0 };

  before(async () => {
    database = await createTestDatabase();
    db = new Database({ url: database.url, poolSize: 2, applicationName: 'documents test', log: testLogger() });
    await new EventWriter(db).write([written], 'test');
    await database.pool.query(
      `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                           fields_accessed, phi_involved, source_ip, user_agent, justification, success, details)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
      [legacy.tenantId, new Date(legacy.occurredAtMs).toISOString(), legacy.eventId, legacy.action, legacy.userId, legacy.userRole,
        legacy.resourceType, legacy.resourceId, legacy.fieldsAccessed, legacy.phiInvolved, legacy.sourceIp, legacy.userAgent,
        legacy.justification, legacy.success, legacy.details],
    );
    reader = new EventReader(db, new CursorCodec(TEST_PEPPER));
  });

  after(async () => {
    await db?.close();
    await database?.drop();
  });

  it('stores the document the write path rendered, byte for byte what Postgres renders from the columns', async () => {
    const { rows } = await database.pool.query(`SELECT document, ${EVENT_JSON} AS rendered FROM events e WHERE event_id = $1`, [written.eventId]);
    expect(rows[0].document).to.be.a('string');
    expect(rows[0].document).to.equal(rows[0].rendered);
    expect(JSON.parse(rows[0].document)).to.deep.include({ user_id: AWKWARD, timestamp: '2026-10-05T08:00:00.001Z', success: false });
  });

  it('serves a row stored without a document exactly as one stored with it', async () => {
    const withDocument = await reader.findOne('doc', written.eventId);
    const withoutDocument = await reader.findOne('doc', legacy.eventId);
    const asStored = (text: string) => text.replace(legacy.eventId, written.eventId).replace('08:00:00.000Z', '08:00:00.001Z');
    expect(asStored(withoutDocument)).to.equal(withDocument);
  });

  it('lists, pages and exports both kinds of row', async () => {
    const first = JSON.parse(await reader.listPage({ tenantId: 'doc', filters: {}, limit: 1, cursor: undefined }));
    expect(first.events.map((event: { event_id: string }) => event.event_id)).to.deep.equal([written.eventId]);
    const second = JSON.parse(await reader.listPage({ tenantId: 'doc', filters: {}, limit: 1, cursor: first.page.next_cursor }));
    expect(second.events.map((event: { event_id: string }) => event.event_id)).to.deep.equal([legacy.eventId]);
    expect(second.page.has_more).to.equal(false);
    const exported = await database.pool.query(exportQuery('doc', {}, {}));
    expect(exported.rows.map((row) => row.json)).to.deep.equal([await reader.findOne('doc', written.eventId), await reader.findOne('doc', legacy.eventId)]);
  });
});
