import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { compactEvents } from '../../src/events/eventCompaction.ts';
import { EVENT_DOCUMENT } from '../../src/events/eventStore.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { checkIntegrity } from '../../src/integrity/integrityCheck.ts';
import { redactEvent } from '../../src/lifecycle/redactions.ts';
import type { Clock } from '../../src/platform/clock.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { sealKeyPair, startTestSealer } from '../support/integrity.ts';
import { testLogger } from '../support/service.ts';

/** Waits of the compaction (for writers to follow the switch) pass at once: the test's writers read the form anew. */
const NO_WAIT: Clock = {
  now: () => Date.now(),
  setTimer(fn) {
    setImmediate(fn);
    return () => {};
  },
};

const DAY = 86_400_000;
const OCTOBER = Date.parse('2026-10-03T08:00:00.000Z');
const NOVEMBER = Date.parse('2026-11-03T08:00:00.000Z');

/** Every event of the database as served, by id. */
async function served(db: TestDatabase): Promise<Map<string, string>> {
  const { rows } = await db.pool.query(`SELECT e.event_id::text AS id, ${EVENT_DOCUMENT} AS document FROM events e`);
  return new Map(rows.map((row: { id: string; document: string }) => [row.id, row.document]));
}

async function forms(db: TestDatabase): Promise<Record<string, number>> {
  const { rows } = await db.pool.query(
    `SELECT CASE WHEN document_values IS NOT NULL THEN 'compact' WHEN document IS NOT NULL AND details IS NULL THEN 'document'
                 WHEN document IS NOT NULL THEN 'full' ELSE 'columns' END AS form, count(*)::int AS n
       FROM events GROUP BY 1`,
  );
  return Object.fromEntries(rows.map((row: { form: string; n: number }) => [row.form, row.n]));
}

describe('audit-trail events compact: existing events rewritten to be stored once', () => {
  let database: TestDatabase;
  let db: Database;
  let redactedId: string;
  const legacyId = '0198f3a0-0000-7000-8000-00000000c0de';

  before(async () => {
    database = await createTestDatabase();
    db = new Database({ url: database.url, poolSize: 4, applicationName: 'compaction test', log: testLogger() });
    // A database upgraded from a release before migration 026: its events in the full form.
    await database.pool.query(`UPDATE event_storage SET form = 'full'`);
    const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
    for (const [tenantId, start] of [
      ['compact-a', OCTOBER],
      ['compact-a', NOVEMBER],
      ['compact-b', NOVEMBER],
    ] as const) {
      const events = Array.from({ length: 700 }, (_, i) =>
        newEvent({
          tenantId,
          occurredAtMs: start + (i % 350) * 60_000,
          userId: `user-${i % 7}`,
          justification: i % 5 === 0 ? 'treatment "urgent" \\ ü' : '',
          details: JSON.stringify({ patient_name: `Patient ${i}`, line: 'a\nb\u0001' }),
        }),
      );
      await writer.write(events, 'test');
    }
    // A row from before stored documents (migration 005): served from its columns, already stored once.
    await database.pool.query(
      `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, phi_involved, success)
       VALUES ('compact-a', $1, $2, 'phi.read', 'legacy', 'clinician', 'claim', 'c-1', true, true)`,
      [new Date(OCTOBER + DAY).toISOString(), legacyId],
    );
    const sealer = await startTestSealer(database.url, sealKeyPair().privateKey);
    await sealer.sealNow();
    await sealer.close();
    const { rows } = await database.pool.query(
      `SELECT event_id::text FROM events WHERE tenant_id = 'compact-b' AND justification <> '' LIMIT 1`,
    );
    redactedId = rows[0].event_id;
    await redactEvent(
      writer,
      { tenantId: 'compact-b', eventId: redactedId, fields: ['details.patient_name', 'justification'], reference: 'DSR-1' },
      { userId: 'dpo', userRole: 'operator' },
    );
  });

  after(async () => {
    await db?.close();
    await database?.drop();
  });

  it('rewrites every event stored twice, resumes after an interruption, and serves every event byte for byte as before', async () => {
    const before = await served(database);
    // 2,100 events, the redaction's admin event, and the row from before documents.
    expect(await forms(database)).to.deep.equal({ full: 2101, columns: 1 });
    // Interrupted after four batches, as a killed run would be: October's 701 rows (three batches, the last
    // one finishing the month) and the first 250 of November. The position is recorded with each batch.
    let batches = 0;
    const interrupted = await compactEvents(db, {
      batchSize: 250,
      clock: NO_WAIT,
      onBatch: () => {
        batches += 1;
        if (batches === 4) throw new Error('stopped');
      },
    }).catch((error: Error) => error);
    expect(interrupted).to.be.an('error');
    const { rows: progress } = await database.pool.query(
      `SELECT partition, compacted::int, finished_at IS NOT NULL AS finished FROM event_compaction_progress ORDER BY partition`,
    );
    expect(progress).to.deep.equal([
      { partition: 'events_2026_10', compacted: 700, finished: true },
      { partition: 'events_2026_11', compacted: 250, finished: false },
    ]);

    // Ingest goes on meanwhile, now in the compact form (the run switched the database).
    const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
    const during = Array.from({ length: 50 }, (_, i) => newEvent({ tenantId: 'compact-a', occurredAtMs: NOVEMBER + i }));
    const writing = writer.write(during, 'test');
    const summary = await compactEvents(db, { batchSize: 250, clock: NO_WAIT });
    await writing;
    expect(summary.compacted + 950).to.equal(2100);
    expect(summary.kept).to.equal(1);

    // The redacted event keeps its stored document (the redaction's own form) and loses its columns.
    expect(await forms(database)).to.deep.equal({ compact: 2100 + 50, document: 1, columns: 1 });
    const after = await served(database);
    for (const [id, document] of before) expect(after.get(id), id).to.equal(document);
    const sealer = await startTestSealer(database.url, sealKeyPair().privateKey);
    await sealer.sealNow();
    await sealer.close();
    const reports = await checkIntegrity(db, { sealIntervalMs: 10_000 });
    for (const report of reports) expect(report.problems, report.tenantId).to.deep.equal([]);
    expect(reports.find((report) => report.tenantId === 'compact-b')!.redacted.map((event) => event.eventId)).to.deep.equal([redactedId]);
    // A run after the last finds nothing left to do.
    expect(await compactEvents(db, { batchSize: 250, clock: NO_WAIT })).to.deep.equal({ partitions: 0, compacted: 0, kept: 0 });
  });

  it('refuses, through the same path, any change of what an event serves', async () => {
    const { rows } = await database.pool.query(`SELECT event_id FROM events WHERE document_values IS NOT NULL LIMIT 1`);
    const attempts = [
      `UPDATE events SET document_values = replace(document_values, 'user-', 'someone-') WHERE event_id = $1`,
      `UPDATE events SET document = ${EVENT_DOCUMENT.replaceAll('e.', 'events.')}, document_values = NULL WHERE event_id = $1`,
      `UPDATE events SET user_id = 'someone' WHERE event_id = $1`,
      `UPDATE events SET leaf_hash = NULL WHERE event_id = $1`,
    ];
    const client = await db.connect();
    try {
      await client.query(`SET audit_trail.compacting = 'on'`);
      for (const attempt of attempts) {
        const error = await client.query(attempt, [rows[0].event_id]).then(
          () => undefined,
          (thrown: Error & { code?: string }) => thrown,
        );
        expect(error?.code, attempt).to.equal('42501');
      }
    } finally {
      await client.query('RESET audit_trail.compacting');
      client.release();
    }
  });
});
