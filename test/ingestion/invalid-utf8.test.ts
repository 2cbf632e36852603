import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { request } from 'undici';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';
import { TEST_INGEST_TOKEN, call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);

/** JSON text with raw bytes put where a marker stands: `bytesOf('{"a":"x@@"}', '@@', [0xff, 0xfe])`. */
function withBytes(json: string, marker: string, bytes: number[]): Buffer {
  const at = json.indexOf(marker);
  if (at < 0) throw new Error(`no ${marker} in ${json}`);
  return Buffer.concat([Buffer.from(json.slice(0, at)), Buffer.from(bytes), Buffer.from(json.slice(at + marker.length))]);
}

describe('invalid UTF-8 in ingested events is refused, naming the field, and nothing is stored', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let nc: NatsConnection;
  let js: JetStreamClient;
  let directory: string;

  const count = async (tenant: string) =>
    Number((await db.pool.query('SELECT count(*) FROM events WHERE tenant_id = $1', [tenant])).rows[0].count);
  const ingest = async (body: Buffer) => {
    const response = await request(`${service.internalUrl}/internal/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json' },
      body,
    });
    return { status: response.statusCode, json: (await response.body.json()) as any };
  };
  const batch = (event: Record<string, unknown>) => JSON.stringify({ events: [producerEvent({ tenant_id: event.tenant_id }), event] });

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({ databaseUrl: db.url, roles: ['api', 'ingest'] });
    nc = await connect({ servers: '127.0.0.1:4222' });
    js = jetstream(nc);
    directory = await mkdtemp(join(tmpdir(), 'audit-utf8-'));
  });

  after(async () => {
    await service?.stop();
    await nc?.close();
    await db?.drop();
    if (directory) await rm(directory, { recursive: true, force: true });
  });

  describe('HTTP ingest', () => {
    const fields: Array<[string, Record<string, unknown>, string]> = [
      ['user_id', producerEvent({ tenant_id: 'utf8-http', user_id: 'nurse-@@' }), 'events.1.user_id'],
      ['justification', producerEvent({ tenant_id: 'utf8-http', justification: 'care @@' }), 'events.1.justification'],
      [
        'a string deep in details',
        producerEvent({ tenant_id: 'utf8-http', details: { ward: { name: '@@' } } }),
        'events.1.details.ward.name',
      ],
      [
        'an entry of fields_accessed',
        producerEvent({ tenant_id: 'utf8-http', fields_accessed: ['a', 'b@@'] }),
        'events.1.fields_accessed.1',
      ],
    ];
    for (const [what, event, field] of fields) {
      it(`answers 422 naming ${field} for 0xFF 0xFE in ${what}`, async () => {
        const response = await ingest(withBytes(batch(event), '@@', [0xff, 0xfe]));
        expect(response.status).to.equal(422);
        expect(response.json.error).to.equal('validation_failed');
        expect(response.json.details).to.have.length(1);
        expect(response.json.details[0].field).to.equal(field);
        expect(response.json.details[0].message).to.match(/^must be valid UTF-8 text \(byte 0xFF at offset \d+ is not\)$/);
        expect(await count('utf8-http')).to.equal(0);
      });
    }

    it('names the object whose key holds invalid bytes', async () => {
      const response = await ingest(withBytes(batch(producerEvent({ tenant_id: 'utf8-http', details: { 'k@@': 1 } })), '@@', [0xc0, 0xaf]));
      expect(response.status).to.equal(422);
      expect(response.json.details[0]).to.deep.include({ field: 'events.1.details' });
      expect(response.json.details[0].message).to.match(/^has a key that is not valid UTF-8 text/);
      expect(await count('utf8-http')).to.equal(0);
    });

    it('refuses an encoded UTF-16 surrogate and an overlong form, which lenient decoders also pass', async () => {
      for (const bytes of [
        [0xed, 0xa0, 0x80],
        [0xe0, 0x80, 0xaf],
      ]) {
        const response = await ingest(withBytes(batch(producerEvent({ tenant_id: 'utf8-http', resource_id: 'r@@' })), '@@', bytes));
        expect(response.status).to.equal(422);
        expect(response.json.details[0].field).to.equal('events.1.resource_id');
      }
      expect(await count('utf8-http')).to.equal(0);
    });

    it('inflates a gzip body before the check: the field is named all the same', async () => {
      const response = await request(`${service.internalUrl}/internal/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json', 'content-encoding': 'gzip' },
        body: gzipSync(withBytes(batch(producerEvent({ tenant_id: 'utf8-http', user_role: 'x@@' })), '@@', [0xfe])),
      });
      expect(response.statusCode).to.equal(422);
      expect(((await response.body.json()) as any).details[0].field).to.equal('events.1.user_role');
      expect(await count('utf8-http')).to.equal(0);
    });

    it('stores valid UTF-8 exactly as sent, U+FFFD and astral characters included', async () => {
      const userId = 'Zoë \u{1F469}\u200D\u2695\uFE0F \uFFFD';
      const response = await ingest(Buffer.from(JSON.stringify({ events: [producerEvent({ tenant_id: 'utf8-ok', user_id: userId })] })));
      expect(response.status).to.equal(200);
      const { rows } = await db.pool.query(`SELECT user_id FROM events WHERE tenant_id = 'utf8-ok'`);
      expect(rows.map((row) => row.user_id)).to.deep.equal([userId]);
    });
  });

  describe('the public API', () => {
    let key: string;
    before(async () => {
      key = (await mintKey(db.url, { tenantId: 'utf8-api', scopes: ['audit:read', 'audit:export'] })).key;
    });

    it('refuses a query parameter whose percent-encoding is not UTF-8, naming it', async () => {
      const response = await call(`${service.baseUrl}/audit/events?action=phi.%FF%FE`, { key });
      expect(response.status).to.equal(422);
      expect(response.json.details).to.deep.equal([{ field: 'action', message: 'must be percent-encoded UTF-8 text' }]);
    });

    it('refuses an export body with invalid UTF-8, naming the field, and records no export', async () => {
      const response = await request(`${service.baseUrl}/audit/export`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: withBytes('{"action":"phi.@@"}', '@@', [0xff]),
      });
      expect(response.statusCode).to.equal(422);
      expect(((await response.body.json()) as any).details[0].field).to.equal('action');
      expect(await count('utf8-api')).to.equal(1); // the key's own admin.key.create
    });
  });

  it('JetStream: terminates the message, counting it as rejected, stores nothing of it, and goes on', async () => {
    const subject = `${service.busNamespace}.audit.ingest.utf8-js`;
    const rejectedBefore = await service.metric('audit_errors_total{kind="ingest_rejected"}');
    await js.publish(subject, withBytes(JSON.stringify(producerEvent({ tenant_id: 'utf8-js', user_id: 'u@@' })), '@@', [0xff, 0xfe]));
    await js.publish(subject, JSON.stringify(producerEvent({ tenant_id: 'utf8-js', user_id: 'fine' })));
    await waitFor(async () => (await count('utf8-js')) === 1, 'the valid event stored');
    await waitFor(
      async () => (await service.metric('audit_errors_total{kind="ingest_rejected"}')) === rejectedBefore + 1,
      'the invalid message rejected',
    );
    const { rows } = await db.pool.query(`SELECT user_id FROM events WHERE tenant_id = 'utf8-js'`);
    expect(rows).to.deep.equal([{ user_id: 'fine' }]);
    const jsm = await jetstreamManager(nc);
    await waitFor(async () => {
      const info = await jsm.consumers.info(`${service.busNamespace.toUpperCase()}_AUDIT_INGEST`, 'audit-ingest');
      return info.num_ack_pending === 0 && info.num_pending === 0;
    }, 'no message left pending');
  });

  it('audit-trail import: names the line and the field, and imports nothing', async () => {
    const line = (userId: string) =>
      JSON.stringify(
        producerEvent({ tenant_id: 'utf8-import', user_id: userId, event_id: randomUUID(), timestamp: new Date().toISOString() }),
      );
    const path = join(directory, 'mixed.ndjson');
    await writeFile(
      path,
      Buffer.concat([Buffer.from(`${line('ok')}\n`), withBytes(`${line('bad@@')}\n`, '@@', [0xff, 0xfe]), Buffer.from(`${line('ok')}\n`)]),
    );
    const failure = (await run(process.execPath, ['src/cli.ts', 'import', path], {
      env: { ...process.env, DATABASE_URL: db.url, LOG_LEVEL: 'warn' },
    }).catch((error: unknown) => error)) as { code: number; stderr: string };
    expect(failure.code).to.equal(1);
    expect(failure.stderr).to.match(/mixed\.ndjson:2: user_id must be valid UTF-8 text \(byte 0xFF at offset \d+ is not\)/);
    expect(await count('utf8-import')).to.equal(0);
  });
});
