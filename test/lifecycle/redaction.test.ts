import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { verifyExport } from '../../src/client/exportVerifier.ts';
import { verifyInclusion } from '../../src/client/integrity.ts';
import { serverSentEvents } from '../../src/client/liveEvents.ts';
import { BinaryRows } from '../../src/db/binaryCopy.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { copyLeafDocuments, documentOfLeafRow } from '../../src/events/leafChunks.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { redactionSchema } from '../../src/http/apiSchemas.ts';
import { REDACTION_MARKER } from '../../src/lifecycle/redaction.ts';
import { redactEvent } from '../../src/lifecycle/redactions.ts';
import type { NewEvent } from '../../src/events/eventStore.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, TEST_INGEST_TOKEN, testLogger, type TestService } from '../support/service.ts';

const T0 = Date.parse('2026-11-20T09:00:00.000Z');
const OPERATOR = { userId: 'dpo@example.com', userRole: 'operator' };
const OPERATOR_TOKEN = 'operator-token-0123456789abcdef';

/**
 * Redaction (issue 31, item 4): free text is replaced by the marker wherever the event is served, the
 * event keeps its leaf and position, the verifiers call it redacted rather than tampered, and nothing else
 * can change, through the one path the append-only table allows.
 */
describe('redaction of free-text fields, keeping proofs', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let database: Database;
  let writer: EventWriter;
  let api: TestService;
  let sealer: TestSealer;
  let dir: string;
  let key: string;
  const keys = sealKeyPair();
  const tenant = 'redact-a';
  const other = 'redact-b';
  const trail: NewEvent[] = Array.from({ length: 6 }, (_, i) =>
    newEvent({
      tenantId: tenant,
      occurredAtMs: T0 + i * 1000,
      resourceId: `claim-${i}`,
      justification: `treating Jane Roe, visit ${i}`,
      details: JSON.stringify({ patient_name: 'Jane Roe', ward: `W${i}`, contact: { phone: '555-0100', kind: 'mobile' } }),
    }),
  );
  const target = trail[2]!;
  const foreign = newEvent({ tenantId: other, occurredAtMs: T0, details: JSON.stringify({ patient_name: 'John Doe' }) });

  before(async () => {
    db = await createTestDatabase();
    database = new Database({ url: db.url, poolSize: 2, applicationName: 'redaction test', log: testLogger() });
    writer = new EventWriter(database, WEBHOOK_FAN_OUT);
    await seedEvents(db.url, [...trail, foreign]);
    sealer = await startTestSealer(db.url, keys.privateKey);
    await sealer.sealNow();
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { OPERATOR_TOKENS: OPERATOR_TOKEN } });
    key = (await mintKey(db.url, { tenantId: tenant, scopes: ['audit:read', 'audit:export'] })).key;
    await sealer.sealNow();
    dir = mkdtempSync(join(tmpdir(), 'audit-redaction-'));
    writeFileSync(join(dir, 'public.pem'), keys.publicPem);
  });

  after(async () => {
    await sealer?.close();
    await api?.stop();
    await database?.close();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function cli(...args: string[]): { status: number | null; stdout: string; stderr: string } {
    const result = spawnSync(process.execPath, ['src/cli.ts', ...args], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH, DATABASE_URL: db.url, LOG_LEVEL: 'silent', AUDIT_ACTOR: 'dpo@example.com' },
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  const lookup = async (eventId: string) => (await call(`${api.baseUrl}/audit/events/${eventId}`, { key })).json;
  const rowOf = async (eventId: string) =>
    (await db.pool.query('SELECT document, details, justification, leaf_hash FROM event_fields WHERE event_id = $1', [eventId])).rows[0];
  const redactionEvents = async (tenantId: string) =>
    (
      await db.pool.query(`SELECT details FROM event_fields WHERE tenant_id = $1 AND action = 'admin.event.redact' ORDER BY occurred_at`, [
        tenantId,
      ])
    ).rows;

  it('redacts with audit-trail redact: the marker is served in the lookup, with which fields, when and the reference', async () => {
    const before = await lookup(target.eventId);
    const result = cli(
      'redact',
      '--tenant',
      tenant,
      '--event',
      target.eventId,
      '--fields',
      'details.patient_name,justification',
      '--reference',
      'DSR-2026-0042',
    );
    expect(result.stderr).to.equal('');
    expect(result.stdout).to.equal(`redacted details.patient_name, justification of event ${target.eventId} (tenant ${tenant})\n`);
    expect(result.status).to.equal(0);

    const after = await lookup(target.eventId);
    expect(after.justification).to.equal(REDACTION_MARKER);
    expect(JSON.parse(after.details)).to.deep.equal({
      patient_name: REDACTION_MARKER,
      ward: 'W2',
      contact: { phone: '555-0100', kind: 'mobile' },
    });
    // Everything else as it was, in the same order; the redaction member last.
    const { justification: _j, details: _d, redaction, ...rest } = after;
    const { justification: _bj, details: _bd, ...restBefore } = before;
    expect(rest).to.deep.equal(restBefore);
    expect(Object.keys(after)).to.deep.equal([...Object.keys(before), 'redaction']);
    expect(redaction.fields).to.deep.equal(['details.patient_name', 'justification']);
    // As the OpenAPI document describes it (the Redaction component).
    expect(redactionSchema.strict().safeParse(redaction).success).to.equal(true);
    expect(redaction.history).to.have.length(1);
    expect(redaction.history[0]).to.include({ reference: 'DSR-2026-0042' });
    expect(redaction.history[0].fields).to.deep.equal(['details.patient_name', 'justification']);
    expect(Date.now() - Date.parse(redaction.history[0].redacted_at)).to.be.within(0, 60_000);
    // The columns (filters, webhook envelopes) hold no trace of the value either.
    const row = await rowOf(target.eventId);
    expect(row.justification).to.equal(REDACTION_MARKER);
    expect(row.details).to.not.contain('Jane Roe');
    expect(row.document).to.not.contain('Jane Roe');
  });

  it("keeps the event's leaf hash and position: its inclusion proof verifies against the signed head with the recorded leaf", async () => {
    const after = await lookup(target.eventId);
    const proof = (await call(`${api.baseUrl}/audit/events/${target.eventId}/proof`, { key })).json;
    const head = (await call(`${api.baseUrl}/audit/integrity/tree-head`, { key })).json;
    expect(proof.leaf_index).to.equal(2);
    expect(proof.leaf_hash).to.equal(after.redaction.leaf_hash);
    expect((await rowOf(target.eventId)).leaf_hash.toString('hex')).to.equal(after.redaction.leaf_hash);
    expect(verifyInclusion(after.redaction.leaf_hash, proof, head)).to.deep.equal({ valid: true });
  });

  it('serves the marker in the list, both export formats, the live stream and what streams send: one served form', async () => {
    const list = (await call(`${api.baseUrl}/audit/events?limit=100`, { key })).json.events;
    const json = (await call(`${api.baseUrl}/audit/export`, { key, body: {} })).json.events;
    const ndjson = (await call(`${api.baseUrl}/audit/export?format=ndjson`, { key, body: {} })).text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const controller = new AbortController();
    const response = await fetch(`${api.baseUrl}/audit/events/live`, {
      headers: { authorization: `Bearer ${key}`, 'last-event-id': trail[1]!.eventId },
      signal: controller.signal,
    });
    let live: Record<string, unknown> | undefined;
    for await (const event of serverSentEvents(response.body as unknown as AsyncIterable<Uint8Array>)) {
      live = JSON.parse(event.data);
      break;
    }
    controller.abort();
    // The target is leaf 2 of the tenant's trail (the proof above says so).
    const streamed = new BinaryRows(await copyLeafDocuments(database, tenant, 2, 1, { actionPrefixes: [], phiInvolved: undefined }));
    expect(streamed.rowCount).to.equal(1);
    streamed.select(0);
    const served = [
      list.find((event: { event_id: string }) => event.event_id === target.eventId),
      json.find((event: { event_id: string }) => event.event_id === target.eventId),
      ndjson.find((event: { event_id: string }) => event.event_id === target.eventId),
      live,
      JSON.parse(documentOfLeafRow(streamed)),
    ];
    const expected = await lookup(target.eventId);
    for (const event of served) expect(event).to.deep.equal(expected);
    expect(JSON.stringify(served)).to.not.contain('Jane Roe');
  });

  it('accumulates a second redaction of other fields, and records each as an admin.event.redact event of the trail', async () => {
    const result = await redactEvent(
      writer,
      { tenantId: tenant, eventId: target.eventId, fields: ['details.contact.phone'], reference: 'DSR-2026-0043' },
      OPERATOR,
    );
    expect(result.redaction.fields).to.deep.equal(['details.patient_name', 'justification', 'details.contact.phone']);
    const after = await lookup(target.eventId);
    expect(after.redaction).to.deep.equal(result.redaction);
    expect(after.redaction.history.map((step: { reference: string }) => step.reference)).to.deep.equal(['DSR-2026-0042', 'DSR-2026-0043']);
    expect(JSON.parse(after.details)).to.deep.equal({
      patient_name: REDACTION_MARKER,
      ward: 'W2',
      contact: { phone: REDACTION_MARKER, kind: 'mobile' },
    });
    const recorded = (await redactionEvents(tenant)).map((row) => JSON.parse(row.details));
    expect(recorded).to.deep.equal([
      {
        event_id: target.eventId,
        event_timestamp: after.timestamp,
        fields: ['details.patient_name', 'justification'],
        reference: 'DSR-2026-0042',
      },
      { event_id: target.eventId, event_timestamp: after.timestamp, fields: ['details.contact.phone'], reference: 'DSR-2026-0043' },
    ]);
    const { rows } = await db.pool.query(
      `SELECT user_id, resource_id FROM events WHERE action = 'admin.event.redact' ORDER BY occurred_at`,
    );
    expect(rows).to.deep.equal([
      { user_id: 'dpo@example.com', resource_id: target.eventId },
      { user_id: 'dpo@example.com', resource_id: target.eventId },
    ]);
  });

  /** What a customer keeps and verifies: the latest head and an export of the whole trail with proofs. */
  async function saveExport(name: string): Promise<{ head: string; export: string; lines: Array<Record<string, any>> }> {
    await sealer.sealNow();
    const head = await call(`${api.baseUrl}/audit/integrity/tree-head`, { key });
    const exported = await call(`${api.baseUrl}/audit/export?format=ndjson&proofs=true`, { key, body: {} });
    expect(exported.status).to.equal(200);
    const paths = { head: join(dir, `${name}-head.json`), export: join(dir, `${name}.ndjson`) };
    writeFileSync(paths.head, head.text);
    writeFileSync(paths.export, exported.text);
    return {
      ...paths,
      lines: exported.text
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line)),
    };
  }

  it('audit-trail verify (and the client package) reports the event as redacted, never tampered, and the rest as proven', async () => {
    const saved = await saveExport('whole');
    const result = cli(
      'verify',
      '--public-key',
      join(dir, 'public.pem'),
      '--export',
      saved.export,
      '--tree-head',
      saved.head,
      '--complete',
    );
    expect(result.stderr).to.equal('');
    expect(result.stdout).to.contain(
      `event ${target.eventId}: redacted (details.patient_name, justification, details.contact.phone; recorded in this export by ` +
        'admin.event.redact, reference DSR-2026-0042, DSR-2026-0043): position and leaf proven, content not re-verifiable\n',
    );
    const total = saved.lines.length;
    expect(result.stdout).to.match(
      new RegExp(
        `verified: ${total} events, ${total - 1} proven against the tree head of size \\d+ .*, 1 redacted \\(position and leaf proven, content not re-verifiable\\), 0 not yet sealed`,
      ),
    );
    expect(result.status).to.equal(0);
    const report = verifyExport({
      exportText: readFileSync(saved.export, 'utf8'),
      trustedKeys: [{ public_key_pem: keys.publicPem }],
      complete: true,
    });
    expect(report.failures).to.deep.equal([]);
    expect(report.redacted).to.deep.equal([
      {
        eventId: target.eventId,
        fields: ['details.patient_name', 'justification', 'details.contact.phone'],
        references: ['DSR-2026-0042', 'DSR-2026-0043'],
        recorded: true,
      },
    ]);
  });

  it('audit-trail verify --stream-copy proves a SIEM copy holding the redacted event as redacted', () => {
    const lines = readFileSync(join(dir, 'whole.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    // The native records a stream sends: the served event with its leaf index, then the head.
    const records = lines
      .map(({ proof, tree_head: _head, ...event }) => ({ ...event, leaf_index: proof.leaf_index }))
      .sort((a, b) => a.leaf_index - b.leaf_index)
      .map((record) => JSON.stringify(record));
    records.push(JSON.stringify({ tree_head: lines[0]!.tree_head }));
    const copy = join(dir, 'copy.ndjson');
    writeFileSync(copy, `${records.join('\n')}\n`);
    const result = cli('verify', '--public-key', join(dir, 'public.pem'), '--stream-copy', copy);
    expect(result.stderr).to.equal('');
    expect(result.stdout).to.contain(
      `tenant ${tenant}: event ${target.eventId}: redacted: position and leaf proven, content not re-verifiable\n`,
    );
    expect(result.stdout).to.match(/repeated records, 1 redacted\)/);
    expect(result.status).to.equal(0);
  });

  it('does not let a forged redaction member hide a change: the whole trail has no redaction event for it', () => {
    const saved = readFileSync(join(dir, 'whole.ndjson'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const victim = saved.find((line) => line.event_id === trail[3]!.eventId)!;
    Object.assign(victim, {
      justification: REDACTION_MARKER,
      redaction: {
        fields: ['justification'],
        leaf_hash: victim.proof.leaf_hash,
        history: [{ fields: ['justification'], redacted_at: victim.timestamp, reference: 'forged' }],
      },
    });
    const forged = join(dir, 'forged.ndjson');
    writeFileSync(forged, `${saved.map((line) => JSON.stringify(line)).join('\n')}\n`);
    const complete = cli('verify', '--public-key', join(dir, 'public.pem'), '--export', forged, '--complete');
    expect(complete.status).to.equal(1);
    expect(complete.stderr).to.contain(
      `event ${trail[3]!.eventId}: it is served redacted (justification) but no proven admin.event.redact event`,
    );
    // A filtered export need not hold the redaction events: it says so rather than failing.
    const partial = cli('verify', '--public-key', join(dir, 'public.pem'), '--export', forged);
    expect(partial.status).to.equal(0);
    expect(partial.stdout).to.contain(
      `event ${trail[3]!.eventId}: redacted (justification; not recorded in this export by admin.event.redact`,
    );
    // And a redaction member whose field does not hold the marker is no redaction at all.
    victim.justification = 'something else';
    writeFileSync(forged, `${saved.map((line) => JSON.stringify(line)).join('\n')}\n`);
    const inconsistent = cli('verify', '--public-key', join(dir, 'public.pem'), '--export', forged);
    expect(inconsistent.status).to.equal(1);
    expect(inconsistent.stderr).to.contain('it claims justification is redacted but does not hold the marker there');
  });

  it("integrity check names the event as redacted and passes; a redaction member added behind the service's back fails it", async () => {
    const check = cli('integrity', 'check', '--tenant', tenant);
    expect(check.stdout).to.contain(
      `tenant ${tenant}: event ${target.eventId} (leaf 2): redacted: position and leaf proven, content not re-verifiable\n`,
    );
    expect(check.stdout).to.match(new RegExp(`tenant ${tenant}: \\d+ leaves, \\d+ tree heads, 1 redacted: ok\\n`));
    expect(check.status).to.equal(0);
    const client = await db.pool.connect();
    try {
      // As a superuser could: triggers off, a document rewritten to look redacted, with the true leaf hash.
      await client.query('SET session_replication_role = replica');
      const leaf = (await call(`${api.baseUrl}/audit/events/${trail[3]!.eventId}/proof`, { key })).json.leaf_hash;
      const served = JSON.parse((await rowOf(trail[3]!.eventId)).document);
      const forged = { ...served, justification: REDACTION_MARKER, redaction: { fields: ['justification'], leaf_hash: leaf, history: [] } };
      await client.query(`UPDATE events SET justification = '[redacted]', document = $2 WHERE event_id = $1`, [
        trail[3]!.eventId,
        JSON.stringify(forged),
      ]);
    } finally {
      await client.query('RESET session_replication_role');
      client.release();
    }
    const tampered = cli('integrity', 'check', '--tenant', tenant);
    expect(tampered.stdout).to.contain(
      `leaf_mismatch: event ${trail[3]!.eventId} (leaf 3): it is served as redacted, but no redaction record produced this form`,
    );
    expect(tampered.status).to.equal(1);
  });

  it('the portal\'s "verify this event" says redacted: position and leaf proven, content not re-verifiable', async () => {
    const origin = new URL(api.baseUrl).origin;
    const globals = globalThis as unknown as Record<string, unknown>;
    globals.document = { baseURI: `${origin}/portal/` };
    globals.location = { origin };
    try {
      const [{ PortalApi }, { verifyEvent }] = await Promise.all([
        import('../../portal/src/api.ts'),
        import('../../portal/src/trail/verify.ts'),
      ]);
      const verification = await verifyEvent(new PortalApi(key), target.eventId, tenant);
      expect(verification.state).to.equal('redacted');
      if (verification.state === 'not_sealed') return;
      expect(verification.checks.every((check) => check.ok)).to.equal(true);
      expect(verification.checks[0]!.label).to.equal('Redacted');
      expect(verification.leafIndex).to.equal(2);
      const plain = await verifyEvent(new PortalApi(key), trail[1]!.eventId, tenant);
      expect(plain.state).to.equal('proven');
    } finally {
      delete globals.document;
      delete globals.location;
    }
  });

  it('refuses bad requests with a clear error and changes nothing', async () => {
    const victim = trail[4]!;
    const before = await rowOf(victim.eventId);
    const foreignBefore = await rowOf(foreign.eventId);
    const attempts: Array<[string, { tenantId: string; eventId: string; fields: string[]; reference?: string }, number, RegExp]> = [
      [
        'an unknown event',
        { tenantId: tenant, eventId: '00000000-0000-4000-8000-000000000000', fields: ['justification'] },
        404,
        /has no event/,
      ],
      ["another tenant's event", { tenantId: tenant, eventId: foreign.eventId, fields: ['details.patient_name'] }, 404, /has no event/],
      ['a malformed id', { tenantId: tenant, eventId: 'not-a-uuid', fields: ['justification'] }, 404, /has no event/],
      ['an id field', { tenantId: tenant, eventId: victim.eventId, fields: ['event_id'] }, 422, /event_id may not be redacted/],
      ['the action', { tenantId: tenant, eventId: victim.eventId, fields: ['justification', 'action'] }, 422, /action may not be redacted/],
      ['the timestamp', { tenantId: tenant, eventId: victim.eventId, fields: ['timestamp'] }, 422, /timestamp may not be redacted/],
      ['the whole details', { tenantId: tenant, eventId: victim.eventId, fields: ['details'] }, 422, /details may not be redacted/],
      [
        'a field the event lacks',
        { tenantId: tenant, eventId: victim.eventId, fields: ['justification', 'details.ssn'] },
        422,
        /has no details\.ssn/,
      ],
      ['a path through a value', { tenantId: tenant, eventId: victim.eventId, fields: ['details.ward.x'] }, 422, /has no details\.ward\.x/],
      ['no reference', { tenantId: tenant, eventId: victim.eventId, fields: ['justification'], reference: ' ' }, 422, /reference/],
      ['an already redacted field', { tenantId: tenant, eventId: target.eventId, fields: ['justification'] }, 422, /already redacted/],
    ];
    for (const [what, input, status, message] of attempts) {
      const error = await redactEvent(writer, { reference: 'DSR-1', ...input }, OPERATOR).then(
        () => undefined,
        (thrown: Error & { status?: number }) => thrown,
      );
      expect(error, what).to.not.equal(undefined);
      expect(error?.status, what).to.equal(status);
      expect(error?.message, what).to.match(message);
    }
    expect(await rowOf(victim.eventId)).to.deep.equal(before);
    expect(await rowOf(foreign.eventId)).to.deep.equal(foreignBefore);
    expect(await redactionEvents(tenant)).to.have.length(2);
    expect(await redactionEvents(other)).to.have.length(0);
    const cliRefusal = cli('redact', '--tenant', tenant, '--event', victim.eventId, '--fields', 'user_id', '--reference', 'R');
    expect(cliRefusal.status).to.equal(1);
    expect(cliRefusal.stderr).to.match(/user_id may not be redacted/);
    expect(await rowOf(victim.eventId)).to.deep.equal(before);
  });

  it('refuses a plain UPDATE, even one that writes the marker, and any change a redaction record does not describe', async () => {
    const victim = trail[5]!;
    const before = await rowOf(victim.eventId);
    const refused = async (sql: string, values: unknown[] = []) => {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        return await client.query(sql, values).then(
          () => undefined,
          (thrown: pg.DatabaseError) => thrown,
        );
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    };
    const plain = await refused(`UPDATE events SET justification = '[redacted]' WHERE event_id = $1`, [victim.eventId]);
    expect(plain?.code).to.equal('42501');
    expect(plain?.message).to.contain('append-only');
    // The setting the redaction trigger uses does not open the table to a client's own statement.
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT set_config('audit_trail.applying_redaction', '1', true)`);
      const spoofed = await client.query(`UPDATE events SET justification = '[redacted]' WHERE event_id = $1`, [victim.eventId]).then(
        () => undefined,
        (thrown: pg.DatabaseError) => thrown,
      );
      expect(spoofed?.code).to.equal('42501');
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    // A record whose document changes something else is refused whole by the table's guard.
    const served = JSON.parse((await rowOf(victim.eventId)).document);
    const forged = JSON.stringify({
      ...served,
      action: 'auth.login',
      justification: '[redacted]',
      redaction: { fields: ['justification'], leaf_hash: '00', history: [] },
    });
    const sneaky = await refused(
      `INSERT INTO event_redactions (tenant_id, event_id, occurred_at, fields, reference, document) VALUES ($1, $2, $3, '{justification}', 'R', $4)`,
      [tenant, victim.eventId, new Date(victim.occurredAtMs), forged],
    );
    expect(sneaky?.code).to.equal('42501');
    const record = await refused('DELETE FROM event_redactions');
    expect(record?.code).to.equal('42501');
    expect(await rowOf(victim.eventId)).to.deep.equal(before);
  });

  it('redacts the same way on the internal port behind an operator token, with the same errors for bad requests', async () => {
    const victim = trail[1]!;
    const redactions = `${api.internalUrl}/internal/v1/redactions`;
    const body = { tenant_id: tenant, event_id: victim.eventId, fields: ['details.ward'], reference: 'DSR-7', actor: 'dpo-tool' };
    const before = await rowOf(victim.eventId);
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer not-an-operator-token-at-all' },
      { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
    ];
    for (const headers of attempts) {
      const refused = await call(redactions, { body, headers });
      expect(refused.status).to.equal(401);
      expect(refused.json).to.deep.equal({ error: 'unauthorized' });
    }
    const headers = { authorization: `Bearer ${OPERATOR_TOKEN}` };
    const bad: Array<[object, number, string]> = [
      [{ ...body, fields: ['action'] }, 422, 'validation_failed'],
      [{ ...body, fields: ['details.nothing_here'] }, 422, 'validation_failed'],
      [{ ...body, event_id: foreign.eventId }, 404, 'not_found'],
      [{ ...body, tenant_id: other }, 404, 'not_found'],
      [{ ...body, extra: true }, 422, 'validation_failed'],
    ];
    for (const [request, status, error] of bad) {
      const answer = await call(redactions, { body: request, headers });
      expect(answer.status, JSON.stringify(request)).to.equal(status);
      expect(answer.json.error).to.equal(error);
    }
    expect(await rowOf(victim.eventId)).to.deep.equal(before);
    const done = await call(redactions, { body, headers });
    expect(done.status).to.equal(200);
    expect(done.json.event_id).to.equal(victim.eventId);
    expect(done.json.redaction.fields).to.deep.equal(['details.ward']);
    expect(JSON.parse((await lookup(victim.eventId)).details).ward).to.equal(REDACTION_MARKER);
    const { rows } = await db.pool.query(
      `SELECT user_id, user_role FROM event_fields WHERE action = 'admin.event.redact' AND resource_id = $1`,
      [victim.eventId],
    );
    expect(rows).to.deep.equal([{ user_id: 'dpo-tool', user_role: 'operator' }]);
  });

  it('applies two concurrent redactions of one event one after the other: both fields end up redacted, in both records', async () => {
    const victim = trail[0]!;
    const results = await Promise.all([
      redactEvent(writer, { tenantId: tenant, eventId: victim.eventId, fields: ['details.patient_name'], reference: 'C-1' }, OPERATOR),
      redactEvent(writer, { tenantId: tenant, eventId: victim.eventId, fields: ['justification'], reference: 'C-2' }, OPERATOR),
    ]);
    const after = await lookup(victim.eventId);
    expect([...after.redaction.fields].sort()).to.deep.equal(['details.patient_name', 'justification']);
    expect(after.justification).to.equal(REDACTION_MARKER);
    expect(JSON.parse(after.details).patient_name).to.equal(REDACTION_MARKER);
    // The later one saw the earlier one's document: its member lists both.
    const longest = results.map((result) => result.redaction.fields.length).sort();
    expect(longest).to.deep.equal([1, 2]);
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM event_redactions WHERE event_id = $1', [victim.eventId]);
    expect(rows[0].n).to.equal(2);
  });
});
