import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { serverSentEvents, type ServerSentEvent } from '../../src/client/liveEvents.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import type { NewEvent } from '../../src/events/eventStore.ts';
import { BatchStatements } from '../../src/events/storeBatch.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { call, mintKey, revokeKey, startTestService, testLogger, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/** A live stream as a client holds it: what it received so far, parsed with the client package's reader. */
interface OpenStream {
  readonly status: number;
  readonly headers: Headers;
  readonly events: ServerSentEvent[];
  /** Every comment line received, e.g. ': heartbeat'. */
  readonly raw: string[];
  /** Resolves when the server ends the response: 'end' when it ended cleanly, 'error' when it was cut. */
  readonly ended: Promise<'end' | 'error'>;
  close(): void;
}

async function openStream(url: string, key: string, headers: Record<string, string> = {}): Promise<OpenStream> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { authorization: `Bearer ${key}`, ...headers }, signal: controller.signal });
  const events: ServerSentEvent[] = [];
  const raw: string[] = [];
  if (!response.ok) {
    await response.text();
    return { status: response.status, headers: response.headers, events, raw, ended: Promise.resolve('end'), close: () => undefined };
  }
  const body = response.body as unknown as AsyncIterable<Uint8Array>;
  const teed = (async function* () {
    for await (const chunk of body) {
      raw.push(new TextDecoder().decode(chunk));
      yield chunk;
    }
  })();
  const ended = (async (): Promise<'end' | 'error'> => {
    try {
      for await (const event of serverSentEvents(teed)) events.push(event);
      return 'end';
    } catch {
      return 'error';
    }
  })();
  // The first bytes (the retry field and a comment) mean the stream's starting point is fixed.
  await waitFor(() => raw.length > 0, 'the stream to open');
  return { status: response.status, headers: response.headers, events, raw, ended, close: () => controller.abort() };
}

const ids = (stream: OpenStream) => stream.events.map((event) => event.id);
const bodies = (stream: OpenStream) => stream.events.map((event) => JSON.parse(event.data) as Record<string, unknown>);

describe('GET /audit/events/live', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let api: TestService;
  let sealer: TestSealer;
  const streams: OpenStream[] = [];
  let tenantCounter = 0;

  before(async () => {
    db = await createTestDatabase();
    api = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      env: { LIVE_HEARTBEAT: '300ms', LIVE_STREAMS_PER_TENANT: '7', LIVE_STREAMS_PER_POD: '50', SEAL_INTERVAL: '2s' },
    });
    sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
  });

  afterEach(() => {
    for (const stream of streams.splice(0)) stream.close();
  });

  after(async () => {
    await api?.stop();
    await sealer?.close();
    await db?.drop();
  });

  /** A tenant of its own per test, with a key, and one sealed event so that its tree exists. */
  async function freshTenant(scopes = ['audit:read']): Promise<{ tenantId: string; key: string; lookupId: string }> {
    tenantCounter += 1;
    const tenantId = `live-${tenantCounter}-${randomUUID().slice(0, 8)}`;
    const minted = await mintKey(db.url, { tenantId, scopes });
    await sealer.sealNow();
    return { tenantId, ...minted };
  }

  async function live(key: string, query = '', headers: Record<string, string> = {}): Promise<OpenStream> {
    const stream = await openStream(`${api.baseUrl}/audit/events/live${query}`, key, headers);
    streams.push(stream);
    return stream;
  }

  async function writeAndSeal(events: NewEvent[]): Promise<void> {
    await seedEvents(db.url, events);
    await sealer.sealNow();
  }

  it('sends the events sealed after it opened, in the order they were sealed, each with its event id as the SSE id', async () => {
    const { tenantId, key } = await freshTenant();
    const stream = await live(key);
    expect(stream.status).to.equal(200);
    expect(stream.headers.get('content-type')).to.match(/^text\/event-stream/);
    expect(stream.headers.get('cache-control')).to.equal('no-store');
    const first = [0, 1, 2].map((i) => newEvent({ tenantId, action: 'phi.read', resourceId: `first-${i}` }));
    await writeAndSeal(first);
    // Dated an hour earlier, committed later: it comes after, as it became visible after.
    const late = newEvent({ tenantId, occurredAtMs: Date.now() - 3_600_000, resourceId: 'late' });
    await writeAndSeal([late]);
    await waitFor(() => stream.events.length >= 4, 'four events');
    const expected = [...first, late].map((event) => event.eventId);
    expect(ids(stream)).to.deep.equal(expected);
    expect(bodies(stream).map((event) => event.event_id)).to.deep.equal(expected);
    expect(bodies(stream)[3]).to.include({ resource_id: 'late', tenant_id: tenantId });
  });

  it("applies the list's filters: action, user_id, resource_type, resource_id, phi_involved, since and until", async () => {
    const { tenantId, key } = await freshTenant();
    const now = Date.now();
    const since = now - 1_800_000;
    const until = now + 60_000;
    const cases: Array<[query: string, matches: (event: NewEvent) => boolean]> = [
      ['action=admin.key.create', (event) => event.action === 'admin.key.create'],
      ['user_id=u-7', (event) => event.userId === 'u-7'],
      ['resource_type=upload', (event) => event.resourceType === 'upload'],
      ['resource_id=patient-9', (event) => event.resourceId === 'patient-9'],
      ['phi_involved=false', (event) => !event.phiInvolved],
      [`since=${new Date(since).toISOString()}`, (event) => event.occurredAtMs >= since],
      [`until=${new Date(until).toISOString()}`, (event) => event.occurredAtMs < until],
    ];
    const opened = [];
    for (const [query] of cases) opened.push(await live(key, `?${query}`));
    expect(opened.map((stream) => stream.status)).to.deep.equal(cases.map(() => 200));
    const written = [
      newEvent({ tenantId, action: 'admin.key.create', userId: 'u-8' }),
      newEvent({ tenantId, userId: 'u-7', resourceType: 'upload' }),
      newEvent({ tenantId, resourceId: 'patient-9', occurredAtMs: now - 3_600_000 }),
      newEvent({ tenantId, resourceId: 'patient-10', phiInvolved: false, fieldsAccessed: '' }),
      newEvent({ tenantId, resourceType: 'upload', resourceId: 'patient-9', occurredAtMs: now + 120_000 }),
      newEvent({ tenantId, action: 'phi.write', userId: 'u-9' }),
    ];
    // Last, an event every filter lets through: a stream that has it has read everything before it.
    const marker = newEvent({
      tenantId,
      action: 'admin.key.create',
      userId: 'u-7',
      resourceType: 'upload',
      resourceId: 'patient-9',
      phiInvolved: false,
      fieldsAccessed: '',
    });
    await writeAndSeal(written.slice(0, 3));
    await writeAndSeal([...written.slice(3), marker]);
    for (const [index, stream] of opened.entries()) {
      const [query, matches] = cases[index]!;
      await waitFor(() => ids(stream).includes(marker.eventId), `the marker on ${query}`);
      const expected = [...written, marker].filter(matches).map((event) => event.eventId);
      expect(expected.length, query).to.be.within(2, written.length);
      expect(ids(stream), query).to.deep.equal(expected);
    }
  });

  it('refuses filters as the list does, and paging parameters it has no use for, with the JSON error shape', async () => {
    const { key } = await freshTenant();
    for (const query of ['?limit=5', '?cursor=abc', '?phi_involved=maybe', '?acton=phi.read', '?action=phi.read&action=phi.write']) {
      const { status, json } = await call(`${api.baseUrl}/audit/events/live${query}`, { key });
      expect(status, query).to.equal(422);
      expect(json.error, query).to.equal('validation_failed');
    }
    const readOnlyExports = (await freshTenant(['audit:export'])).key;
    const forbidden = await call(`${api.baseUrl}/audit/events/live`, { key: readOnlyExports });
    expect(forbidden.status).to.equal(403);
    expect(forbidden.json).to.include({ error: 'forbidden', required_scope: 'audit:read' });
    const anonymous = await call(`${api.baseUrl}/audit/events/live`);
    expect(anonymous.status).to.equal(401);
  });

  it('resumes after a disconnect with Last-Event-ID, losing and repeating nothing, across filtered-out and late-dated events', async () => {
    const { tenantId, key } = await freshTenant();
    const before = await live(key, '?action=phi.read');
    const seen = [newEvent({ tenantId }), newEvent({ tenantId })];
    await writeAndSeal(seen);
    await waitFor(() => before.events.length === 2, 'the first two events');
    before.close();
    // While disconnected: an event the filter leaves out, one dated before everything seen, and two more.
    const missed = [
      newEvent({ tenantId, action: 'admin.key.create' }),
      newEvent({ tenantId, occurredAtMs: Date.now() - 7_200_000 }),
      newEvent({ tenantId }),
    ];
    await writeAndSeal(missed.slice(0, 2));
    await writeAndSeal(missed.slice(2));
    const after = await live(key, '?action=phi.read', { 'Last-Event-ID': before.events.at(-1)!.id! });
    const following = newEvent({ tenantId });
    await writeAndSeal([following]);
    await waitFor(() => after.events.length >= 3, 'the missed events and the next one');
    expect(ids(after)).to.deep.equal([missed[1]!.eventId, missed[2]!.eventId, following.eventId]);
  });

  it('sends an event whose transaction committed after a later event was sent, and a stream resumed after that later event gets it', async () => {
    const { tenantId, key } = await freshTenant();
    const stream = await live(key);
    const writer = new Database({ url: db.url, poolSize: 1, applicationName: 'test slow writer', log: testLogger() });
    try {
      // Inserted first, with the earlier timestamp and the smaller id, but committed last.
      const slow = newEvent({ tenantId, eventId: '00000000-0000-4000-8000-000000000001', occurredAtMs: Date.now() - 1000 });
      let commit!: () => void;
      const committed = writer.transaction(async (client) => {
        await new BatchStatements(WEBHOOK_FAN_OUT).store(
          client,
          { events: [slow], timestamps: [formatTimestamp(slow.occurredAtMs)], form: 'compact' },
          'relay',
        );
        await new Promise<void>((resolve) => (commit = resolve));
      });
      await waitFor(() => commit !== undefined, 'the slow transaction to insert');
      const fast = newEvent({ tenantId, eventId: 'ffffffff-ffff-4fff-bfff-ffffffffffff' });
      await writeAndSeal([fast]);
      await waitFor(() => stream.events.length === 1, 'the fast event');
      const resumed = await live(key, '', { 'Last-Event-ID': fast.eventId });
      commit();
      await committed;
      await sealer.sealNow();
      await waitFor(() => stream.events.length === 2 && resumed.events.length === 1, 'the slow event on both streams');
      expect(ids(stream)).to.deep.equal([fast.eventId, slow.eventId]);
      expect(ids(resumed)).to.deep.equal([slow.eventId]);
    } finally {
      await writer.close();
    }
  });

  it("refuses a Last-Event-ID that is not one of the tenant's sealed events: 422, or 409 not_yet_sealed with Retry-After", async () => {
    const { tenantId, key } = await freshTenant();
    const other = await freshTenant();
    const foreign = newEvent({ tenantId: other.tenantId });
    await writeAndSeal([foreign]);
    const unsealed = newEvent({ tenantId });
    await seedEvents(db.url, [unsealed]);
    const url = `${api.baseUrl}/audit/events/live`;
    for (const id of ['not-a-uuid', randomUUID(), foreign.eventId]) {
      const { status, json } = await call(url, { key, headers: { 'last-event-id': id } });
      expect(status, id).to.equal(422);
      expect(json.details, id).to.deep.equal([{ field: 'Last-Event-ID', message: json.details[0].message }]);
    }
    const early = await call(url, { key, headers: { 'last-event-id': unsealed.eventId } });
    expect(early.status).to.equal(409);
    expect(early.json.error).to.equal('not_yet_sealed');
    expect(early.headers.get('retry-after')).to.equal('2');
    await sealer.sealNow();
  });

  it("never sends another tenant's events", async () => {
    const mine = await freshTenant();
    const theirs = await freshTenant();
    const stream = await live(mine.key);
    const foreign = Array.from({ length: 5 }, () => newEvent({ tenantId: theirs.tenantId }));
    const own = newEvent({ tenantId: mine.tenantId });
    await writeAndSeal([...foreign, own]);
    await writeAndSeal([newEvent({ tenantId: theirs.tenantId })]);
    const marker = newEvent({ tenantId: mine.tenantId, action: 'zzz.marker' });
    await writeAndSeal([marker]);
    await waitFor(() => stream.events.length >= 2, 'my two events');
    expect(ids(stream)).to.deep.equal([own.eventId, marker.eventId]);
    expect(bodies(stream).every((event) => event.tenant_id === mine.tenantId)).to.equal(true);
  });

  it('admits LIVE_STREAMS_PER_TENANT streams of a tenant; the next is 429 concurrent_live_streams until one closes', async () => {
    const { key } = await freshTenant();
    const other = await freshTenant();
    const first = await live(key);
    for (let opened = 1; opened < 7; opened += 1) expect((await live(key)).status).to.equal(200);
    const refused = await call(`${api.baseUrl}/audit/events/live`, { key });
    expect(refused.status).to.equal(429);
    expect(refused.json).to.include({ error: 'concurrent_live_streams', limit: 7, retry_after_s: 2 });
    expect(refused.headers.get('retry-after')).to.equal('2');
    expect(await api.metric('audit_live_streams_refused_total{limit="tenant"}')).to.be.at.least(1);
    expect(await api.metric('audit_live_streams_active')).to.be.at.least(7);
    // Another tenant is not held back.
    expect((await live(other.key)).status).to.equal(200);
    first.close();
    await waitFor(async () => {
      const again = await openStream(`${api.baseUrl}/audit/events/live`, key);
      streams.push(again);
      return again.status === 200;
    }, 'a slot freed by the closed stream');
  });

  it('sends a heartbeat comment when nothing else was sent for LIVE_HEARTBEAT', async () => {
    const { key } = await freshTenant();
    const stream = await live(key);
    await waitFor(() => stream.raw.join('').split(': heartbeat\n\n').length >= 3, 'two heartbeats', 10_000);
    expect(stream.events).to.deep.equal([]);
  });

  it('ends a stream within seconds once its key is revoked', async () => {
    const { key, lookupId } = await freshTenant();
    const stream = await live(key);
    await revokeKey(db.url, lookupId);
    // Not a sleep: the stream's end is awaited, and 15 s is the "within seconds" bound being asserted.
    expect(await Promise.race([stream.ended, new Promise((resolve) => setTimeout(() => resolve('still open'), 15_000))])).to.equal('end');
    expect((await call(`${api.baseUrl}/audit/events/live`, { key })).status).to.equal(401);
  });

  it('is documented in the OpenAPI document with its filters, Last-Event-ID and the concurrent_live_streams refusal', async () => {
    const { json } = await call(`${api.baseUrl}/openapi.json`);
    const operation = json.paths['/audit/events/live'].get;
    const names = operation.parameters.map((parameter: { name: string }) => parameter.name);
    expect(names).to.include.members([
      'action',
      'user_id',
      'resource_type',
      'resource_id',
      'phi_involved',
      'since',
      'until',
      'Last-Event-ID',
    ]);
    expect(names).to.not.include('limit');
    expect(Object.keys(operation.responses['200'].content)).to.deep.equal(['text/event-stream']);
    expect(json.components.schemas.ConcurrentLiveStreams.properties.error.const).to.equal('concurrent_live_streams');
  });
});

describe('GET /audit/events/live when the service stops', function () {
  this.timeout(60_000);
  let db: TestDatabase;

  before(async () => {
    db = await createTestDatabase();
  });

  after(async () => {
    await db?.drop();
  });

  it('ends open streams cleanly at once, without holding the shutdown for its grace period', async () => {
    const api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { SHUTDOWN_GRACE_MS: '10000' } });
    const { key } = await mintKey(db.url, { tenantId: 'stopping', scopes: ['audit:read'] });
    const stream = await openStream(`${api.baseUrl}/audit/events/live`, key);
    const started = Date.now();
    await api.stop();
    expect(Date.now() - started).to.be.below(5_000);
    expect(await stream.ended).to.equal('end');
  });
});
