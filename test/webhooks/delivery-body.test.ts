import { expect } from 'chai';
import type { AuditEvent } from '../../src/client/auditEvent.ts';
import { buildEnvelope, deliveredEventOf } from '../../src/client/webhookEnvelope.ts';
import { Database } from '../../src/db/database.ts';
import { deliveryBodyOfParts } from '../../src/delivery/deliveryBody.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { DOCUMENT_PARTS, type DocumentParts } from '../../src/events/eventDocument.ts';
import { EVENT_DOCUMENT, type NewEvent } from '../../src/events/eventStore.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { testLogger } from '../support/service.ts';

/**
 * A worker puts a delivery's body together from the stored event's parts (delivery/deliveryBody.ts): a
 * compact row's value texts spliced into the envelope, anything else parsed. Every attempt of a delivery must
 * carry the bytes the envelope of the served document has always had, so each kind of row, with text that
 * JSON and Postgres both give a meaning to, is compared with the envelope built from the document Postgres
 * serves (EVENT_DOCUMENT), parsed here.
 */
describe('delivery bodies from stored events', () => {
  let database: TestDatabase;
  let db: Database;

  const AWKWARD = 'quote " backslash \\ brace { } tab \t newline \n \u0001 \u001f del \u007f \u2028 </script> ünïcødé 🩺 NULL';
  const TIME = Date.parse('2026-10-05T08:00:00.000Z');

  before(async () => {
    database = await createTestDatabase();
    db = new Database({ url: database.url, poolSize: 2, applicationName: 'delivery body test', log: testLogger() });
  });

  after(async () => {
    await db?.close();
    await database?.drop();
  });

  /** Each stored row's body as the worker makes it, and the envelope of the document Postgres serves for it. */
  async function bodies(tenantId: string): Promise<Array<{ body: string; expected: string }>> {
    const { rows } = await database.pool.query<{ served: string }>({
      text: `SELECT ${EVENT_DOCUMENT} AS served FROM events e WHERE e.tenant_id = $1 ORDER BY e.event_id`,
      values: [tenantId],
    });
    const parts = (
      await database.pool.query({
        text: `SELECT ${DOCUMENT_PARTS} FROM events e WHERE e.tenant_id = $1 ORDER BY e.event_id`,
        values: [tenantId],
        rowMode: 'array',
      })
    ).rows as unknown as DocumentParts[];
    expect(parts).to.have.length(rows.length);
    return rows.map((row, index) => ({ body: deliveryBodyOfParts(parts[index]!), expected: envelopeOfServed(row.served) }));
  }

  /** The envelope of a served document, the way deliveries were always built: parsed, then buildEnvelope. */
  function envelopeOfServed(served: string): string {
    return buildEnvelope(deliveredEventOf(JSON.parse(served) as AuditEvent));
  }

  it('builds the body of every event the write path stores as its envelope has always been', async () => {
    // Objects as ingestion stores them, and texts a writer around it could have stored: spaced, with numbers
    // JSON.stringify writes otherwise, not an object at all.
    const details = [
      {},
      { note: AWKWARD, nested: { list: [1, 'two', null, true] } },
      { '2': 'integer-like keys come first in JavaScript', a: 1, '1': 0 },
      { big: 1e21, small: 5e-7, negative: -0, float: 0.1 },
      { __proto__key: 'x', ['__proto__']: 'own' },
    ].map((detail) => JSON.stringify(detail));
    details.push('{ "a" : 1.0, "b": [1e2, 0.50] }', '[1,2]', '"text"', 'null');
    const events: NewEvent[] = [];
    for (const [index, detail] of details.entries()) {
      for (const success of [true, false]) {
        events.push(
          newEvent({
            tenantId: 'compact',
            occurredAtMs: TIME + index,
            userId: AWKWARD,
            userRole: index % 2 === 0 ? AWKWARD : '',
            resourceType: AWKWARD,
            resourceId: `${AWKWARD}-${index}`,
            phiInvolved: success,
            success,
            details: detail,
          }),
        );
      }
    }
    await new EventWriter(db, WEBHOOK_FAN_OUT).write(events, 'test');
    const made = await bodies('compact');
    expect(made).to.have.length(events.length);
    for (const { body, expected } of made) expect(body).to.equal(expected);
  });

  it('builds the same body for rows that serve a stored document or their columns, and for details that are not an object', async () => {
    const event = newEvent({ tenantId: 'other-forms', occurredAtMs: TIME, userId: AWKWARD, details: JSON.stringify({ note: AWKWARD }) });
    await new EventWriter(db, WEBHOOK_FAN_OUT).write([event], 'test');
    // A row as a pod before documents stored it (columns only), one keeping a document of a later version,
    // and one written around the service with details that are not an object.
    const served = (
      await database.pool.query<{ served: string }>(`SELECT ${EVENT_DOCUMENT} AS served FROM events e WHERE e.event_id = $1`, [
        event.eventId,
      ])
    ).rows[0]!.served;
    const rows: Array<{ offsetMs: number; details: string; document: string | null; version: number }> = [
      { offsetMs: 1, details: event.details, document: null, version: 1 },
      { offsetMs: 2, details: event.details, document: `${served.slice(0, -1)},"sealed_by":"a later version"}`, version: 2 },
      { offsetMs: 3, details: '[1,2]', document: null, version: 1 },
    ];
    for (const row of rows) {
      await database.pool.query(
        `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                             fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, document, document_version)
         VALUES ($1, $2, gen_random_uuid(), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
        [
          event.tenantId,
          new Date(event.occurredAtMs + row.offsetMs).toISOString(),
          event.action,
          event.userId,
          event.userRole,
          event.resourceType,
          event.resourceId,
          event.fieldsAccessed,
          event.phiInvolved,
          event.sourceIp,
          event.userAgent,
          event.justification,
          event.success,
          row.details,
          row.document,
          row.version,
        ],
      );
    }
    const made = await bodies('other-forms');
    expect(made).to.have.length(4);
    for (const { body, expected } of made) expect(body).to.equal(expected);
    expect(
      made.some(({ body }) => body.includes('"details":{}')),
      'details that are not an object',
    ).to.equal(true);
  });
});
