import { expect } from 'chai';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { AuditTrailApiError, AuditTrailClient, serverSentEvents, type AuditEvent, type ServerSentEvent } from '../../src/client/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

async function parse(chunks: string[], onRetry?: (ms: number) => void): Promise<ServerSentEvent[]> {
  const encoder = new TextEncoder();
  const body = (async function* () {
    for (const chunk of chunks) yield encoder.encode(chunk);
  })();
  const events: ServerSentEvent[] = [];
  for await (const event of serverSentEvents(body, onRetry)) events.push(event);
  return events;
}

describe('serverSentEvents (the client package reads the live stream with it)', () => {
  it('splits on LF, CRLF and CR, even when a CRLF is split between chunks', async () => {
    const events = await parse(['data: a\r', '\n\r', '\ndata: b\rdata: c\r\r', 'data: d\n\n']);
    expect(events.map((event) => event.data)).to.deep.equal(['a', 'b\nc', 'd']);
  });

  it('ignores comments, joins data lines, keeps the last id for later events and reports retry', async () => {
    const retries: number[] = [];
    const events = await parse([': live\nretry: 1500\n\n', 'id: 1\ndata: {"a":\ndata: 1}\n\n: heartbeat\n\n', 'data: no id\n\n'], (ms) =>
      retries.push(ms),
    );
    expect(events).to.deep.equal([
      { id: '1', event: 'message', data: '{"a":\n1}' },
      { id: '1', event: 'message', data: 'no id' },
    ]);
    expect(retries).to.deep.equal([1500]);
  });

  it('names the event type, strips one leading space only, and drops an event the stream ends before closing', async () => {
    const events = await parse(['event: other\ndata:  two spaces\n\ndata:x\n\ndata: unfinished']);
    expect(events).to.deep.equal([
      { id: undefined, event: 'other', data: ' two spaces' },
      { id: undefined, event: 'message', data: 'x' },
    ]);
  });
});

/** A TCP relay between the client and the service whose connections the test can cut. */
async function startRelay(port: number): Promise<{
  url: (path: string) => string;
  cut: () => void;
  connections: () => number;
  open: () => number;
  close: () => Promise<void>;
}> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server: Server = createServer((client) => {
    accepted += 1;
    const upstream = connect(port, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const relayPort = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${relayPort}${path}`,
    cut: () => {
      for (const socket of sockets) socket.destroy();
    },
    connections: () => accepted,
    open: () => sockets.size,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('AuditTrailClient.live against the service', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let api: TestService;
  let sealer: TestSealer;
  let relay: Awaited<ReturnType<typeof startRelay>>;

  before(async () => {
    db = await createTestDatabase();
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { LIVE_HEARTBEAT: '300ms' } });
    sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    relay = await startRelay(Number(new URL(api.baseUrl).port));
  });

  after(async () => {
    await relay?.close();
    await api?.stop();
    await sealer?.close();
    await db?.drop();
  });

  async function tenantWithKey(tenantId: string): Promise<AuditTrailClient> {
    const { key } = await mintKey(db.url, { tenantId, scopes: ['audit:read'] });
    await sealer.sealNow();
    return new AuditTrailClient({ baseUrl: relay.url('/api/v2/public'), apiKey: key, baseDelayMs: 50 });
  }

  /** An event written and sealed now: a stream resumed after it starts here, however long it takes to connect. */
  async function sealedEvent(tenantId: string): Promise<string> {
    const event = newEvent({ tenantId, action: 'test.start' });
    await seedEvents(db.url, [event]);
    await sealer.sealNow();
    return event.eventId;
  }

  /** Collects what an iteration yields until the signal aborts. */
  function collect(iterable: AsyncIterable<AuditEvent>): { events: AuditEvent[]; done: Promise<unknown> } {
    const events: AuditEvent[] = [];
    const done = (async () => {
      for await (const event of iterable) events.push(event);
    })();
    return { events, done };
  }

  it('yields the matching events as they are sealed and reconnects a cut connection with the last id: nothing lost, nothing twice', async () => {
    const client = await tenantWithKey('client-live');
    const start = await sealedEvent('client-live');
    const controller = new AbortController();
    const { events, done } = collect(client.live({ action: 'phi.read', lastEventId: start, signal: controller.signal }));
    const first = [newEvent({ tenantId: 'client-live' }), newEvent({ tenantId: 'client-live', action: 'admin.key.create' })];
    await seedEvents(db.url, first);
    await sealer.sealNow();
    await waitFor(() => events.length === 1, 'the first event');
    relay.cut();
    // Written while the client is away (or reconnecting): a filtered-out one, one dated yesterday, one more.
    const meanwhile = [
      newEvent({ tenantId: 'client-live', action: 'admin.key.revoke' }),
      newEvent({ tenantId: 'client-live', occurredAtMs: Date.now() - 86_400_000 }),
      newEvent({ tenantId: 'client-live' }),
    ];
    await seedEvents(db.url, meanwhile);
    await sealer.sealNow();
    const connections = relay.connections();
    await waitFor(() => relay.connections() > connections, 'the client to reconnect');
    const later = newEvent({ tenantId: 'client-live' });
    await seedEvents(db.url, [later]);
    await sealer.sealNow();
    await waitFor(() => events.length >= 4, 'every phi.read event');
    controller.abort();
    await done;
    expect(events.map((event) => event.event_id)).to.deep.equal([
      first[0]!.eventId,
      meanwhile[1]!.eventId,
      meanwhile[2]!.eventId,
      later.eventId,
    ]);
    expect(events[1]).to.include({ tenant_id: 'client-live', action: 'phi.read' });
  });

  it('resumes after the lastEventId given, as a later process would', async () => {
    const client = await tenantWithKey('client-resume');
    const written = [0, 1, 2].map(() => newEvent({ tenantId: 'client-resume' }));
    await seedEvents(db.url, written);
    await sealer.sealNow();
    const controller = new AbortController();
    const { events, done } = collect(client.live({ lastEventId: written[0]!.eventId, signal: controller.signal }));
    await waitFor(() => events.length >= 2, 'the two events after the first');
    controller.abort();
    await done;
    expect(events.map((event) => event.event_id)).to.deep.equal([written[1]!.eventId, written[2]!.eventId]);
  });

  it('ends when the loop is left, and rejects with the API error for a refused request', async () => {
    const client = await tenantWithKey('client-refused');
    const iterator = client.live({ lastEventId: await sealedEvent('client-refused') })[Symbol.asyncIterator]();
    const written = newEvent({ tenantId: 'client-refused' });
    await seedEvents(db.url, [written]);
    await sealer.sealNow();
    expect(((await iterator.next()).value as AuditEvent).event_id).to.equal(written.eventId);
    expect(relay.open()).to.be.above(0);
    expect(await iterator.return?.(undefined)).to.deep.equal({ done: true, value: undefined });
    await waitFor(() => relay.open() === 0, 'the connection to close');

    const stranger = new AuditTrailClient({ baseUrl: relay.url('/api/v2/public'), apiKey: `atr_live_${'0'.repeat(8)}_${'0'.repeat(32)}` });
    let refused: unknown;
    try {
      for await (const _ of stranger.live()) break;
    } catch (error) {
      refused = error;
    }
    expect(refused).to.be.instanceOf(AuditTrailApiError);
    expect((refused as AuditTrailApiError).status).to.equal(401);
    const invalid = client.live({ since: 'yesterday' });
    const rejected = await invalid.next().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((rejected as AuditTrailApiError).status).to.equal(422);
  });
});
