import { gunzipSync } from 'node:zlib';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { expect } from 'chai';
import { AuditTrailClient } from '../../src/client/auditTrailClient.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { sealKeyPair } from '../support/integrity.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { SplunkHecReceiver } from '../support/siem-receivers.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { waitFor } from '../support/wait.ts';
import { Webhook as SvixWebhook } from 'svix';

/**
 * The public API of log streams (docs/streams.md, docs/api.md) on a service running the api, sealer and
 * streams roles, against a loopback HEC: scopes, validation, tenant isolation, secrets never shown, and a
 * stream created through the API delivering its own creation event.
 */
describe('/api/v2/public/audit/streams', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let hec: SplunkHecReceiver;
  let collector: TestReceiver;
  let writer: string;
  let reader: string;
  let otherTenant: string;
  let validateStream: (value: unknown) => boolean;

  before(async () => {
    db = await createTestDatabase();
    hec = await new SplunkHecReceiver({ tokens: { 'hec-secret-token': {} } }).start();
    collector = await startReceiver(204, '/collect');
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'sealer', 'streams'],
      env: {
        SEAL_SIGNING_KEY: sealKeyPair().privatePem,
        SEAL_INTERVAL: '200ms',
        STREAMS_POLL_MS: '100',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      },
    });
    writer = (await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read', 'streams:write'] })).key;
    reader = (await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'] })).key;
    otherTenant = (await mintKey(db.url, { tenantId: 'globex', scopes: ['audit:read', 'streams:write'] })).key;
    const document = (await call(`${service.baseUrl}/openapi.json`)).json;
    const dereferenced = (await SwaggerParser.dereference(structuredClone(document))) as any;
    validateStream = new Ajv2020({ strict: false, validateFormats: false }).compile(dereferenced.components.schemas.LogStream);
  });

  after(async () => {
    await service?.stop();
    await hec?.stop();
    await collector?.close();
    await db?.drop();
  });

  const create = (key: string, body: unknown) => call(`${service.baseUrl}/audit/streams`, { key, body });
  const hecDestination = () => ({ type: 'splunk_hec', url: hec.url, token: 'hec-secret-token', index: 'audit' });

  it('creates a stream (201, Location), shows it without its token, and delivers its own creation event to HEC', async () => {
    const created = await create(writer, { destination: hecDestination(), format: 'native' });
    expect(created.status).to.equal(201);
    const { stream } = created.json;
    expect(created.headers.get('location')).to.equal(`/api/v2/public/audit/streams/${stream.id}`);
    expect(validateStream(stream)).to.equal(true);
    expect(stream).to.include({ status: 'active', format: 'native', tree_heads: true, last_error: null });
    expect(stream.destination).to.deep.equal({ type: 'splunk_hec', url: hec.url, index: 'audit' });
    expect(created.text).not.to.include('hec-secret-token');
    await waitFor(() => hec.events.some((event) => event.event.action === 'admin.stream.create'), 'the creation event delivered', 20_000);
    const creation = hec.events.find((event) => event.event.action === 'admin.stream.create')!;
    // The two keys minted before it wrote admin.key.create events: leaves 0 and 1.
    expect(creation.event).to.include({ tenant_id: 'acme', resource_id: stream.id, leaf_index: 2 });
    expect(JSON.stringify(creation.event)).not.to.include('hec-secret-token');
    await waitFor(
      async () => (await call(`${service.baseUrl}/audit/streams/${stream.id}`, { key: reader })).json.stream.position === 3,
      'position 3',
    );
    const shown = await call(`${service.baseUrl}/audit/streams/${stream.id}`, { key: reader });
    expect(shown.json.stream).to.include({ position: 3, lag_events: 0, lag_seconds: 0 });
    expect(shown.json.stream.last_delivered_at).to.be.a('string');
    expect(shown.text).not.to.include('hec-secret-token');
    const listed = await call(`${service.baseUrl}/audit/streams`, { key: reader });
    expect(listed.json.streams.map((item: { id: string }) => item.id)).to.include(stream.id);
  });

  it('needs streams:write to change streams and audit:read to read them', async () => {
    const refused = await create(reader, { destination: hecDestination() });
    expect(refused.status).to.equal(403);
    expect(refused.json).to.include({ error: 'forbidden', required_scope: 'streams:write' });
  });

  it('refuses an invalid body with the documented 422, unknown fields included, and creates nothing', async () => {
    const before = (await call(`${service.baseUrl}/audit/streams`, { key: reader })).json.streams.length;
    const cases: Array<[unknown, string]> = [
      [{ destination: { type: 'kafka', url: 'https://k.example.com' } }, 'destination.type'],
      [{ destination: { type: 'splunk_hec', url: hec.url } }, 'destination.token'],
      [{ destination: hecDestination(), filters: { phi_involved: true } }, 'filters'],
      [{ destination: hecDestination(), start_at: '2999-01-01T00:00:00Z' }, 'start_at'],
      [{ destination: hecDestination(), filter: { action_prefixes: ['PHI READ'] } }, 'filter.action_prefixes.0'],
      [{ destination: hecDestination(), format: 'ocsf', ocsf_version: '1.1.0' }, 'ocsf_version'],
      [{ destination: hecDestination(), ocsf_version: '1.7.0' }, 'ocsf_version'],
      [
        { destination: { type: 'amqp', url: 'amqps://u:p@broker.example.com', username: 'u', password: 'p', exchange: 'audit' } },
        'destination.url',
      ],
      [
        { destination: { type: 'amqp', url: 'https://broker.example.com', username: 'u', password: 'p', exchange: 'audit' } },
        'destination.url',
      ],
      [{ destination: { type: 'amqp', url: 'amqp://127.0.0.1', username: 'u', password: 'p', exchange: 'a b' } }, 'destination.exchange'],
      [
        { destination: { type: 's3', bucket: 'Bad_Bucket', prefix: 'a', region: 'eu-west-1', access_key_id: 'k', secret_access_key: 's' } },
        'destination.bucket',
      ],
      // Secrets sent in an HTTP header: a value no header can carry failed every batch after a 201.
      [{ destination: { ...hecDestination(), token: 'tökén-ünsafe' } }, 'destination.token'],
      [{ destination: { ...hecDestination(), token: 'two words' } }, 'destination.token'],
      [{ destination: { type: 'datadog', url: hec.url, api_key: 'key\r\nX-Injected: 1' } }, 'destination.api_key'],
      [
        { destination: { type: 's3', bucket: 'audit', prefix: 'a', region: 'eu-west-1', access_key_id: 'clé', secret_access_key: 's' } },
        'destination.access_key_id',
      ],
    ];
    for (const [body, field] of cases) {
      const response = await create(writer, body);
      expect(response.status, JSON.stringify(body)).to.equal(422);
      expect(response.json.error).to.equal('validation_failed');
      expect(response.json.details.map((detail: { field: string }) => detail.field)).to.include(field);
      // A refused secret is never echoed back.
      expect(response.text).not.to.match(/tökén|two words|X-Injected/);
    }
    expect((await call(`${service.baseUrl}/audit/streams`, { key: reader })).json.streams.length).to.equal(before);
  });

  it('answers 404 for another tenant’s stream, identical to an unknown id, and changes nothing', async () => {
    const { stream } = (await create(writer, { destination: hecDestination() })).json;
    const unknown = await call(`${service.baseUrl}/audit/streams/str_${'0'.repeat(32)}`, { key: otherTenant });
    for (const [method, path] of [
      ['GET', ''],
      ['POST', '/pause'],
      ['POST', '/resume'],
      ['POST', '/test'],
      ['DELETE', ''],
    ] as const) {
      const response = await call(`${service.baseUrl}/audit/streams/${stream.id}${path}`, { key: otherTenant, method });
      expect(response.status, `${method} ${path}`).to.equal(404);
      expect(response.json).to.deep.equal(unknown.json);
    }
    expect((await call(`${service.baseUrl}/audit/streams/${stream.id}`, { key: reader })).json.stream.status).to.equal('active');
  });

  it('creates an AMQP stream and never shows its password', async () => {
    const destination = {
      type: 'amqp',
      url: 'amqp://127.0.0.1:5672/audit',
      username: 'siem',
      password: 'broker-secret',
      exchange: 'audit',
    };
    const created = await create(writer, { destination });
    expect(created.status).to.equal(201);
    expect(created.json.stream.destination).to.deep.equal({
      type: 'amqp',
      url: 'amqp://127.0.0.1:5672/audit',
      username: 'siem',
      exchange: 'audit',
    });
    const shown = await call(`${service.baseUrl}/audit/streams/${created.json.stream.id}`, { key: reader });
    expect(shown.text).not.to.include('broker-secret');
  });

  it('gives an ocsf stream OCSF 1.7.0 unless it asks for 1.3.0, and a native one none', async () => {
    expect((await create(writer, { destination: hecDestination(), format: 'ocsf' })).json.stream.ocsf_version).to.equal('1.7.0');
    const older = await create(writer, { destination: hecDestination(), format: 'ocsf', ocsf_version: '1.3.0' });
    expect(older.json.stream).to.include({ format: 'ocsf', ocsf_version: '1.3.0' });
    expect((await call(`${service.baseUrl}/audit/streams/${older.json.stream.id}`, { key: reader })).json.stream.ocsf_version).to.equal(
      '1.3.0',
    );
    expect((await create(writer, { destination: hecDestination() })).json.stream.ocsf_version).to.equal(null);
  });

  it('pauses, resumes, tests and deletes', async () => {
    const { stream } = (await create(writer, { destination: hecDestination() })).json;
    const paused = await call(`${service.baseUrl}/audit/streams/${stream.id}/pause`, { key: writer, method: 'POST' });
    expect(paused.status).to.equal(200);
    expect(paused.json.stream.status).to.equal('paused');
    const resumed = await call(`${service.baseUrl}/audit/streams/${stream.id}/resume`, { key: writer, method: 'POST' });
    expect(resumed.json.stream.status).to.equal('active');
    const tested = await call(`${service.baseUrl}/audit/streams/${stream.id}/test`, { key: writer, method: 'POST' });
    expect(tested.json).to.include({ success: true, error: null });
    expect(hec.events.some((event) => event.sourcetype === 'audit-trail:test' && event.event.stream_test.stream_id === stream.id)).to.equal(
      true,
    );
    const deleted = await call(`${service.baseUrl}/audit/streams/${stream.id}`, { key: writer, method: 'DELETE' });
    expect(deleted.status).to.equal(204);
    expect((await call(`${service.baseUrl}/audit/streams/${stream.id}`, { key: reader })).status).to.equal(404);
  });

  it('gives an https stream a signing secret once, in both forms, that svix verifies a test send with; a test reports what the collector answered', async () => {
    const created = await create(writer, { destination: { type: 'https', url: collector.url } });
    expect(created.json.secret).to.match(/^[0-9a-f]{64}$/);
    expect(created.json.standard_webhooks_secret).to.match(/^whsec_[A-Za-z0-9+/]+=*$/);
    const shown = await call(`${service.baseUrl}/audit/streams/${created.json.stream.id}`, { key: reader });
    expect(shown.text).not.to.include(created.json.secret);
    expect(shown.text).not.to.include(created.json.standard_webhooks_secret);
    const sent = collector.received.length;
    expect(
      (await call(`${service.baseUrl}/audit/streams/${created.json.stream.id}/test`, { key: writer, method: 'POST' })).json.success,
    ).to.equal(true);
    // The receiver's framework unpacks the body (Content-Encoding: gzip) and hands the text to Svix's verifier.
    const request = collector.received[sent]!;
    const text = gunzipSync(request.rawBody).toString('utf8');
    expect(() =>
      new SvixWebhook(created.json.standard_webhooks_secret).verify(text, request.headers as Record<string, string>),
    ).not.to.throw();
    expect(JSON.parse(text).stream_test.stream_id).to.equal(created.json.stream.id);
    collector.reply(401);
    const tested = await call(`${service.baseUrl}/audit/streams/${created.json.stream.id}/test`, { key: writer, method: 'POST' });
    expect(tested.json).to.include({ success: false, error: 'the collector answered 401' });
    collector.reply(204);
  });
});

describe('the client package’s stream methods', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let service: TestService;
  let hec: SplunkHecReceiver;

  before(async () => {
    db = await createTestDatabase();
    hec = await new SplunkHecReceiver({ tokens: { t: {} } }).start();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' },
    });
  });
  after(async () => {
    await service?.stop();
    await hec?.stop();
    await db?.drop();
  });

  it('creates, reads, pauses, resumes, tests and deletes a stream, a Date start_at sent as RFC 3339', async () => {
    const { key } = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read', 'streams:write'] });
    const client = new AuditTrailClient({ baseUrl: service.baseUrl, apiKey: key });
    const { stream, secret } = await client.createStream({
      destination: { type: 'splunk_hec', url: hec.url, token: 't' },
      format: 'ocsf',
      filter: { action_prefixes: ['phi.'] },
      start_at: new Date('2026-01-01T00:00:00Z'),
    });
    expect(secret).to.equal(undefined);
    expect(stream).to.include({ format: 'ocsf', start_at: '2026-01-01T00:00:00.000Z', status: 'active' });
    expect((await client.listStreams()).map((item) => item.id)).to.deep.equal([stream.id]);
    expect((await client.pauseStream(stream.id)).status).to.equal('paused');
    expect((await client.resumeStream(stream.id)).status).to.equal('active');
    expect((await client.getStream(stream.id)).filter).to.deep.equal({ action_prefixes: ['phi.'] });
    expect((await client.testStream(stream.id)).success).to.equal(true);
    await client.deleteStream(stream.id);
    expect(await client.listStreams()).to.deep.equal([]);
  });
});

describe('/api/v2/public/audit/streams without private targets', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let service: TestService;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({ databaseUrl: db.url, roles: ['api'] });
  });
  after(async () => {
    await service?.stop();
    await db?.drop();
  });

  it('refuses destinations on private addresses and plain http, like webhook URLs', async () => {
    const { key } = await mintKey(db.url, { tenantId: 'acme', scopes: ['streams:write'] });
    const loopback = await call(`${service.baseUrl}/audit/streams`, {
      key,
      body: { destination: { type: 'datadog', url: 'https://127.0.0.1:8443', api_key: 'k' } },
    });
    expect(loopback.status).to.equal(422);
    expect(loopback.json.details[0]).to.deep.include({ field: 'destination.url' });
    expect(loopback.json.details[0].message).to.equal('host is not a public address; stream destinations must be public addresses');
    const metadata = await call(`${service.baseUrl}/audit/streams`, {
      key,
      body: {
        destination: {
          type: 's3',
          bucket: 'b-1',
          prefix: 'p',
          region: 'us-east-1',
          endpoint: 'https://169.254.169.254',
          access_key_id: 'k',
          secret_access_key: 's',
        },
      },
    });
    expect(metadata.status).to.equal(422);
    expect(metadata.json.details[0].field).to.equal('destination.endpoint');
    const plain = await call(`${service.baseUrl}/audit/streams`, {
      key,
      body: { destination: { type: 'https', url: 'http://collector.example.com/in' } },
    });
    expect(plain.status).to.equal(422);
    expect(plain.json.details[0]).to.deep.include({ field: 'destination.url', message: 'must use https' });
  });
});
