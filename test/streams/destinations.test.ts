import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import S3rver from 's3rver';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { standardWebhooksSecretOf, verifyWebhookSignature } from '../../src/client/webhookSignature.ts';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { cutBatches } from '../../src/streams/batches.ts';
import type { Destination, EncodedBatch, JsonWriter } from '../../src/streams/destinations/destination.ts';
import { type ItemEncoder, itemEncoderOf } from '../../src/streams/destinations/itemEncoders.ts';
import { openDestination } from '../../src/streams/destinations/openDestination.ts';
import type { S3Objects } from '../../src/streams/destinations/s3Objects.ts';
import { eventRecord, testRecord, treeHeadRecord, type StreamRecord } from '../../src/streams/records.ts';
import type { DestinationInput, StreamFormat } from '../../src/streams/streamRules.ts';
import { newEvent } from '../support/newEvents.ts';
import { freePort } from '../support/ports.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { DatadogReceiver, SplunkHecReceiver } from '../support/siem-receivers.ts';

const OPTIONS = { timeoutMs: 5_000, allowPrivateTargets: true };
const STREAM_ID = 'str_0123456789abcdef0123456789abcdef';
const HEAD = {
  tenant_id: 'tenant-a',
  tree_size: 12,
  root_hash: 'ab'.repeat(32),
  timestamp: '2026-11-02T08:00:05.000Z',
  key_id: 'cd'.repeat(16),
  signature: 'c2ln',
};

/** JSON written into the body from bytes, as a stream's native records of compact rows are (records.ts). */
const writtenFrom = (bytes: Buffer): JsonWriter => ({ byteLength: bytes.length, writeTo: (target, at) => at + bytes.copy(target, at) });
const jsonTexts = new WeakMap<JsonWriter, string>();

/**
 * Event records of the format; every other native one carries its JSON as a JsonWriter, as a stream's records
 * of compact rows do, so that each destination writes both kinds.
 */
function records(format: StreamFormat, count: number, firstLeaf = 10): StreamRecord[] {
  return Array.from({ length: count }, (_, index) => {
    const stored = newEvent({ occurredAtMs: Date.parse('2026-11-02T08:00:00.000Z') + index, action: index % 2 ? 'phi.read' : 'phi.query' });
    const record = eventRecord(format, 'tenant-a', renderEventDocument(stored, formatTimestamp(stored.occurredAtMs)), firstLeaf + index);
    if (format !== 'native' || index % 2 === 0) return record;
    const json = writtenFrom(Buffer.from(record.json));
    jsonTexts.set(json, record.json);
    return { ...record, json };
  });
}

/** A record's JSON as text, whichever form it carries. */
const jsonOf = (record: StreamRecord) => (typeof record.json === 'string' ? record.json : jsonTexts.get(record.json)!);

/** Each destination the tests open, with the item encoder its stream puts its batches together with. */
const encoders = new WeakMap<Destination, ItemEncoder>();

/** The records in one batch, whatever the destination's limits (a test of them sends more than they allow). */
function batchOf(destination: Destination, items: StreamRecord[]): EncodedBatch {
  const span = { streamId: STREAM_ID, tenantId: 'tenant-a', firstLeaf: items[0]!.leafIndex, lastLeaf: items.at(-1)!.leafIndex };
  const batches = cutBatches(
    encoders.get(destination)!,
    { maxItems: Number.MAX_SAFE_INTEGER, maxBytes: Number.MAX_SAFE_INTEGER },
    span,
    items,
    undefined,
  );
  expect(batches).to.have.length(1);
  return { ...batches[0]!.encoded, createdAtMs: Date.parse('2026-11-02T09:00:00.000Z') };
}

describe('stream destinations, each against a receiver of its real protocol', function () {
  this.timeout(30_000);
  const opened: Destination[] = [];
  const open = (destination: DestinationInput, format: StreamFormat = 'native', secret?: string, options = OPTIONS) => {
    const result = openDestination(destination, secret, options, format);
    encoders.set(result, itemEncoderOf(destination, format));
    opened.push(result);
    return result;
  };
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((destination) => destination.close()));
  });

  describe('Splunk HTTP Event Collector', () => {
    let hec: SplunkHecReceiver;
    beforeEach(async () => {
      hec = await new SplunkHecReceiver({
        tokens: { 'hec-token': {}, 'ack-token': { ack: true }, 'off-token': { disabled: true } },
        allowedIndexes: ['audit'],
      }).start();
    });
    afterEach(() => hec.stop());

    it('posts the batch gzipped as HEC events with time, source, sourcetype and index, the records as events, a tree head first', async () => {
      const destination = open({ type: 'splunk_hec', url: hec.url, token: 'hec-token', index: 'audit' });
      const sent = [treeHeadRecord(HEAD, 10), ...records('native', 3)];
      expect(await destination.send(batchOf(destination, sent))).to.deep.equal({ kind: 'delivered' });
      expect(hec.requests[0]!.headers).to.include({ authorization: 'Splunk hec-token', 'content-encoding': 'gzip' });
      expect(hec.requests[0]!.headers['x-splunk-request-channel']).to.match(/^[0-9a-f-]{36}$/);
      expect(hec.events.map((event) => event.sourcetype)).to.deep.equal([
        'audit-trail:tree_head',
        'audit-trail:native',
        'audit-trail:native',
        'audit-trail:native',
      ]);
      expect(hec.events[0]!.event).to.deep.equal({ tree_head: HEAD });
      expect(hec.events.slice(1).map((event) => event.event)).to.deep.equal(sent.slice(1).map((record) => JSON.parse(jsonOf(record))));
      expect(hec.events[1]).to.include({ index: 'audit', source: 'audit-trail', time: Date.parse('2026-11-02T08:00:00.000Z') / 1000 });
    });

    it('answers a token with indexer acknowledgement, which needs the channel every request names', async () => {
      const destination = open({ type: 'splunk_hec', url: hec.url, token: 'ack-token' }, 'ocsf');
      expect(await destination.send(batchOf(destination, records('ocsf', 2)))).to.deep.equal({ kind: 'delivered' });
      expect(hec.events.map((event) => event.sourcetype)).to.deep.equal(['audit-trail:ocsf', 'audit-trail:ocsf']);
    });

    it('is refused for an unknown or disabled token and an index the token may not write, with HEC’s code and text', async () => {
      const wrong = open({ type: 'splunk_hec', url: hec.url, token: 'nope' });
      expect(await wrong.send(batchOf(wrong, records('native', 1)))).to.deep.equal({
        kind: 'refused',
        reason: 'HEC answered 403 (code 4: Invalid token)',
      });
      const disabled = open({ type: 'splunk_hec', url: hec.url, token: 'off-token' });
      expect(await disabled.send(batchOf(disabled, records('native', 1)))).to.deep.equal({
        kind: 'refused',
        reason: 'HEC answered 403 (code 1: Token disabled)',
      });
      const index = open({ type: 'splunk_hec', url: hec.url, token: 'hec-token', index: 'secret' });
      expect(await index.send(batchOf(index, records('native', 1)))).to.deep.equal({
        kind: 'refused',
        reason: 'HEC answered 400 (code 7: Incorrect index)',
      });
      expect(hec.events).to.have.length(0);
    });

    it('retries while HEC is busy, after the Retry-After it gives, and while nothing listens', async () => {
      const destination = open({ type: 'splunk_hec', url: hec.url, token: 'hec-token' });
      hec.mode = 'busy';
      expect(await destination.send(batchOf(destination, records('native', 1)))).to.deep.equal({
        kind: 'retry',
        reason: 'HEC answered 503 (code 9: Server is busy)',
        retryAfterMs: 1000,
      });
      await hec.stop();
      const outcome = await destination.send(batchOf(destination, records('native', 1)));
      expect(outcome.kind).to.equal('retry');
      expect((outcome as { reason: string }).reason).to.match(/^ECONNREFUSED/);
    });

    it('keeps a full batch within HEC’s 1 MB, and learns of a smaller limit by its 413', async () => {
      const destination = open({ type: 'splunk_hec', url: hec.url, token: 'hec-token' });
      expect(encoders.get(destination)!.limits.maxBytes).to.equal(1_000_000);
      hec.maxContentLength = 100;
      expect((await destination.send(batchOf(destination, records('native', 20)))).kind).to.equal('too_large');
    });
  });

  describe('Datadog logs intake', () => {
    let datadog: DatadogReceiver;
    beforeEach(async () => {
      datadog = await new DatadogReceiver({ apiKeys: ['dd-key'] }).start();
    });
    afterEach(() => datadog.stop());

    it('posts a gzipped array of logs with ddsource, service, ddtags and the record nested, at most 1,000 a request', async () => {
      const destination = open({ type: 'datadog', url: datadog.url, api_key: 'dd-key', service: 'ehr', tags: ['env:prod'] });
      expect(encoders.get(destination)!.limits).to.deep.equal({ maxItems: 1000, maxBytes: 5_000_000 });
      const sent = [treeHeadRecord(HEAD, 10), ...records('native', 3)];
      expect(await destination.send(batchOf(destination, sent))).to.deep.equal({ kind: 'delivered' });
      expect(datadog.requests[0]!.headers).to.include({ 'dd-api-key': 'dd-key', 'content-encoding': 'gzip' });
      expect(datadog.logs[0]).to.deep.include({
        ddsource: 'audit-trail',
        service: 'ehr',
        ddtags: 'tenant:tenant-a,env:prod,record:tree_head',
        tree_head: HEAD,
      });
      expect(datadog.logs.slice(1).map((log) => log.audit)).to.deep.equal(sent.slice(1).map((record) => JSON.parse(jsonOf(record))));
      expect(datadog.logs[1]).to.include({ ddtags: 'tenant:tenant-a,env:prod', message: 'phi.query (leaf 10)' });
      // The event's time is not the log's: a backfilled event is older than the intake's 18 hours.
      expect(datadog.logs[1]).not.to.have.property('timestamp');
    });

    it('nests an ocsf record under ocsf, an ocsf test record too', async () => {
      const destination = open({ type: 'datadog', url: datadog.url, api_key: 'dd-key' }, 'ocsf');
      await destination.send(batchOf(destination, records('ocsf', 1)));
      expect(datadog.logs[0]!.ocsf).to.include({ class_uid: 6005 });
      const test = testRecord(STREAM_ID, 'tenant-a', { format: 'ocsf', ocsfVersion: '1.7.0' });
      await destination.send(batchOf(destination, [test]));
      expect(datadog.logs[1]).to.include({ message: 'test', ddtags: 'tenant:tenant-a,record:test' });
      expect(datadog.logs[1]!.ocsf).to.include({ class_uid: 0, activity_name: 'stream.test' });
    });

    it('is refused for an invalid key, retried on 503, and the intake refuses more than 1,000 entries', async () => {
      const wrong = open({ type: 'datadog', url: datadog.url, api_key: 'other' });
      expect(await wrong.send(batchOf(wrong, records('native', 1)))).to.deep.equal({
        kind: 'refused',
        reason: 'Datadog answered 403 (Forbidden: API key is invalid)',
      });
      const destination = open({ type: 'datadog', url: datadog.url, api_key: 'dd-key' });
      datadog.mode = 'busy';
      expect((await destination.send(batchOf(destination, records('native', 1)))).kind).to.equal('retry');
      datadog.mode = 'normal';
      expect((await destination.send(batchOf(destination, records('native', 1001)))).kind).to.equal('refused');
      expect(datadog.logs).to.have.length(0);
    });
  });

  describe('plain HTTPS collector', () => {
    let receiver: TestReceiver;
    beforeEach(async () => {
      receiver = await startReceiver(204, '/collect');
    });
    afterEach(() => receiver.close());

    it('posts gzipped NDJSON signed like a webhook over the bytes sent, naming the stream, tenant and leaves', async () => {
      const destination = open({ type: 'https', url: receiver.url }, 'native', 'f'.repeat(64));
      const sent = records('native', 3, 5);
      expect(await destination.send(batchOf(destination, sent))).to.deep.equal({ kind: 'delivered' });
      const [request] = receiver.received;
      expect(request!.headers).to.include({
        'content-type': 'application/x-ndjson',
        'content-encoding': 'gzip',
        'x-audit-stream-id': STREAM_ID,
        'x-audit-tenant-id': 'tenant-a',
        'x-audit-first-leaf': '5',
        'x-audit-last-leaf': '7',
        'webhook-id': `${STREAM_ID}.tenant-a.5-7`,
      });
      expect(verifyWebhookSignature('f'.repeat(64), request!.headers['x-service-signature'] as string, request!.rawBody).valid).to.equal(
        true,
      );
      expect(verifyWebhookSignature('e'.repeat(64), request!.headers['x-service-signature'] as string, request!.rawBody).valid).to.equal(
        false,
      );
      const lines = gunzipSync(request!.rawBody).toString('utf8').trimEnd().split('\n');
      expect(lines).to.deep.equal(sent.map(jsonOf));
    });

    /** What a receiver's framework hands its code: the body unpacked from its Content-Encoding, as text. */
    const decodedBody = (request: { rawBody: Buffer }) => gunzipSync(request.rawBody).toString('utf8');
    const headersOf = (request: { headers: Record<string, unknown> }) => request.headers as Record<string, string>;

    it('signs what the Standard Webhooks libraries verify, as published: svix and standardwebhooks over the unpacked NDJSON', async () => {
      const secret = 'f'.repeat(64);
      const whsec = standardWebhooksSecretOf(secret);
      const destination = open({ type: 'https', url: receiver.url }, 'native', secret);
      await destination.send(batchOf(destination, records('native', 3, 5)));
      const [request] = receiver.received;
      expect(() => new SvixWebhook(whsec).verify(decodedBody(request!), headersOf(request!))).not.to.throw();
      // NDJSON is no JSON document: standardwebhooks checks the signature and is told not to parse it.
      expect(new StandardWebhook(whsec).verify(decodedBody(request!), headersOf(request!), { jsonParse: false })).to.equal(undefined);
      // Another secret, or a changed body, is refused by both.
      const other = standardWebhooksSecretOf('e'.repeat(64));
      expect(() => new SvixWebhook(other).verify(decodedBody(request!), headersOf(request!))).to.throw(/No matching signature/);
      const changed = decodedBody(request!).replace('phi.query', 'phi.read_');
      expect(() => new StandardWebhook(whsec).verify(changed, headersOf(request!), { jsonParse: false })).to.throw(/No matching signature/);
    });

    it('with body json, posts one JSON array that standardwebhooks verifies and parses with its defaults', async () => {
      const secret = 'a'.repeat(64);
      const destination = open({ type: 'https', url: receiver.url, body: 'json' }, 'ocsf', secret);
      const sent = records('ocsf', 3, 5);
      await destination.send(batchOf(destination, sent));
      const [request] = receiver.received;
      expect(request!.headers['content-type']).to.equal('application/json');
      const payload = new StandardWebhook(standardWebhooksSecretOf(secret)).verify(decodedBody(request!), headersOf(request!));
      expect(payload).to.deep.equal(sent.map((record) => JSON.parse(jsonOf(record))));
      expect(() => new SvixWebhook(standardWebhooksSecretOf(secret)).verify(decodedBody(request!), headersOf(request!))).not.to.throw();
      // X-Service-Signature is over the bytes as sent, as it always was.
      expect(verifyWebhookSignature(secret, request!.headers['x-service-signature'] as string, request!.rawBody).valid).to.equal(true);
    });

    it('retries a 5xx and a 429, refuses a 404 and a redirect', async () => {
      const destination = open({ type: 'https', url: receiver.url }, 'native', 'f'.repeat(64));
      const outcomeFor = async (status: number) => {
        receiver.reply(status);
        return (await destination.send(batchOf(destination, records('native', 1)))).kind;
      };
      expect(await outcomeFor(500)).to.equal('retry');
      expect(await outcomeFor(429)).to.equal('retry');
      expect(await outcomeFor(404)).to.equal('refused');
      expect(await outcomeFor(302)).to.equal('refused');
    });

    it('refuses a loopback collector when private targets are not allowed (the webhooks’ SSRF guard)', async () => {
      const destination = open({ type: 'https', url: receiver.url }, 'native', 'f'.repeat(64), { ...OPTIONS, allowPrivateTargets: false });
      const outcome = await destination.send(batchOf(destination, records('native', 1)));
      expect(outcome.kind).to.equal('refused');
      expect((outcome as { reason: string }).reason).to.equal('target refused: host is not a public address');
      expect(receiver.received).to.have.length(0);
    });
  });

  describe('S3-compatible object storage', () => {
    let server: S3rver;
    let directory: string;
    let endpoint: string;
    const client = () =>
      new S3Client({
        region: 'us-east-1',
        endpoint,
        forcePathStyle: true,
        credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      });

    before(async () => {
      directory = mkdtempSync(join(tmpdir(), 'audit-trail-s3rver-'));
      const port = await freePort();
      server = new S3rver({
        port,
        address: '127.0.0.1',
        silent: true,
        directory,
        configureBuckets: [{ name: 'siem-archive', configs: [] }],
      });
      await server.run();
      endpoint = `http://127.0.0.1:${port}`;
    });
    after(async () => {
      await server?.close();
      rmSync(directory, { recursive: true, force: true });
    });

    const settings = (overrides: Partial<Extract<DestinationInput, { type: 's3' }>> = {}): DestinationInput => ({
      type: 's3',
      bucket: 'siem-archive',
      prefix: 'audit/prod',
      region: 'us-east-1',
      endpoint,
      access_key_id: 'S3RVER',
      secret_access_key: 'S3RVER',
      force_path_style: true,
      ...overrides,
    });

    it('writes each batch as one gzipped NDJSON object under prefix/tenant/yyyy/mm/dd/, named by its leaves', async () => {
      const destination = open(settings());
      const sent = [treeHeadRecord(HEAD, 10), ...records('native', 3, 10)];
      const batch = batchOf(destination, sent);
      expect(await destination.send(batch)).to.deep.equal({ kind: 'delivered' });
      const key = `audit/prod/tenant-a/2026/11/02/0000000000000010-0000000000000012-${STREAM_ID}.ndjson.gz`;
      expect((destination as S3Objects).keyOf(batch)).to.equal(key);
      const s3 = client();
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'siem-archive', Prefix: 'audit/prod/tenant-a/' }));
      expect(listed.Contents?.map((object) => object.Key)).to.deep.equal([key]);
      const object = await s3.send(new GetObjectCommand({ Bucket: 'siem-archive', Key: key }));
      const bytes = Buffer.from(await object.Body!.transformToByteArray());
      expect(gunzipSync(bytes).toString('utf8').trimEnd().split('\n')).to.deep.equal(sent.map(jsonOf));
      s3.destroy();
    });

    it('stores a gzip file that a plain HTTP download (a presigned URL with fetch, curl) saves as gzip', async () => {
      const destination = open(settings({ prefix: 'download' }));
      const sent = records('native', 3, 10);
      const batch = batchOf(destination, sent);
      expect(await destination.send(batch)).to.deep.equal({ kind: 'delivered' });
      // s3rver serves objects without a signature: fetch stands for any client given a presigned URL.
      const response = await fetch(`${endpoint}/siem-archive/${(destination as S3Objects).keyOf(batch)}`);
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-type')).to.equal('application/gzip');
      expect(response.headers.get('content-encoding')).to.equal(null);
      const bytes = Buffer.from(await response.arrayBuffer());
      expect([...bytes.subarray(0, 2)], "gzip's magic bytes").to.deep.equal([0x1f, 0x8b]);
      expect(gunzipSync(bytes).toString('utf8').trimEnd().split('\n')).to.deep.equal(sent.map(jsonOf));
    });

    it('sorts later batches after earlier ones in a listing', async () => {
      const destination = open(settings({ prefix: 'sorted' }));
      for (const first of [9, 100, 1_000_000]) await destination.send(batchOf(destination, records('native', 1, first)));
      const s3 = client();
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'siem-archive', Prefix: 'sorted/' }));
      const keys = listed.Contents!.map((object) => object.Key!);
      expect(keys).to.have.length(3);
      expect(keys.map((key) => key.split('/').at(-1)!.slice(0, 16))).to.deep.equal([
        '0000000000000009',
        '0000000000000100',
        '0000000001000000',
      ]);
      s3.destroy();
    });

    // s3rver knows its access key ids but does not check SigV4 signatures, so a wrong key id stands for wrong credentials.
    it('is refused for unknown credentials or an unknown bucket, retried while the store is away', async () => {
      const wrongKey = open(settings({ access_key_id: 'AKIAUNKNOWN' }));
      const refused = await wrongKey.send(batchOf(wrongKey, records('native', 1)));
      expect(refused.kind).to.equal('refused');
      expect((refused as { reason: string }).reason).to.match(/^S3 answered 403 InvalidAccessKeyId/);
      const noBucket = open(settings({ bucket: 'missing-bucket' }));
      const missing = await noBucket.send(batchOf(noBucket, records('native', 1)));
      expect((missing as { reason: string }).reason).to.match(/^S3 answered 404 NoSuchBucket/);
      const away = open(settings({ endpoint: `http://127.0.0.1:${await freePort()}` }));
      expect((await away.send(batchOf(away, records('native', 1)))).kind).to.equal('retry');
    });
  });
});
