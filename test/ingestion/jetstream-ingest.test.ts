import { expect } from 'chai';
import { createHash, randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

describe('JetStream ingestion (audit.ingest.<tenant_id>)', () => {
  let db: TestDatabase;
  let service: TestService;
  let nc: NatsConnection;
  let js: JetStreamClient;
  let jsm: JetStreamManager;
  let streamName: string;
  // The service's warnings, one JSON object a line: a rejection names the message by its stream sequence.
  const logLines: Array<Record<string, unknown>> = [];

  const subject = (tenant: string) => `${service.busNamespace}.audit.ingest.${tenant}`;
  const publish = (tenant: string, body: unknown) => js.publish(subject(tenant), typeof body === 'string' ? body : JSON.stringify(body));
  const rowsOf = async (tenant: string) =>
    (await db.pool.query('SELECT event_id, action, occurred_at FROM events WHERE tenant_id = $1 ORDER BY occurred_at', [tenant])).rows;

  before(async () => {
    db = await createTestDatabase();
    const log = createLogger('warn', { write: (line: string) => logLines.push(JSON.parse(line)) });
    service = await startTestService({ databaseUrl: db.url, roles: ['ingest'], log });
    nc = await connect({ servers: '127.0.0.1:4222' });
    js = jetstream(nc);
    jsm = await jetstreamManager(nc);
    streamName = `${service.busNamespace.toUpperCase()}_AUDIT_INGEST`;
  });

  after(async () => {
    await service?.stop();
    await jsm?.streams.delete(streamName).catch(() => undefined);
    await nc?.close();
    await db?.drop();
  });

  it('stores published events and acknowledges them only once stored', async () => {
    for (let i = 0; i < 25; i += 1) await publish('js-a', producerEvent({ tenant_id: 'js-a', action: 'phi.read' }));
    await waitFor(async () => (await rowsOf('js-a')).length === 25, 'all 25 events stored');
    await waitFor(async () => {
      const info = await jsm.consumers.info(streamName, 'audit-ingest');
      return info.num_ack_pending === 0 && info.num_pending === 0;
    }, 'every message acknowledged');
    // Work-queue retention: acknowledged messages leave the stream.
    expect((await jsm.streams.info(streamName)).state.messages).to.equal(0);
  });

  it('takes the tenant from the subject when the body omits it', async () => {
    const event = producerEvent();
    delete event.tenant_id;
    await publish('js-subject', event);
    await waitFor(async () => (await rowsOf('js-subject')).length === 1, 'event stored under the subject tenant');
  });

  it('derives id and timestamp from the stream position, so a redelivery is the same event', async () => {
    const event = producerEvent({ tenant_id: 'js-derived' });
    const ack = await publish('js-derived', event);
    await waitFor(async () => (await rowsOf('js-derived')).length === 1, 'event stored');
    const [row] = await rowsOf('js-derived');
    const hash = createHash('sha256').update(`${ack.stream}:${ack.seq}`).digest('hex');
    const expectedId = `${hash.slice(0, 8)}-${hash.slice(8, 12)}-8${hash.slice(13, 16)}`;
    expect(row.event_id.slice(0, 18)).to.equal(expectedId);
  });

  it('stores a producer-identified event once however often it is published', async () => {
    const event = producerEvent({ tenant_id: 'js-idem', event_id: randomUUID(), timestamp: new Date().toISOString() });
    await publish('js-idem', event);
    await publish('js-idem', event);
    await publish('js-idem', producerEvent({ tenant_id: 'js-idem' }));
    await waitFor(async () => {
      const info = await jsm.consumers.info(streamName, 'audit-ingest');
      return info.num_ack_pending === 0 && info.num_pending === 0;
    }, 'all three messages processed');
    expect(await rowsOf('js-idem')).to.have.length(2);
  });

  it('terminates messages that can never be stored, without holding up valid ones', async () => {
    const notJson = await publish('js-poison', 'not json');
    await publish('js-poison', producerEvent({ tenant_id: 'js-poison', action: 'BAD ACTION' }));
    await publish('js-poison', producerEvent({ tenant_id: 'someone-else' }));
    await publish('js-poison', [producerEvent({ tenant_id: 'js-poison' })]);
    await publish('js-poison', producerEvent({ tenant_id: 'js-poison', action: 'phi.query' }));
    await waitFor(async () => (await rowsOf('js-poison')).length === 1, 'the valid event stored');
    await waitFor(async () => {
      const info = await jsm.consumers.info(streamName, 'audit-ingest');
      return info.num_ack_pending === 0 && info.num_pending === 0;
    }, 'poison messages terminated rather than redelivered');
    expect((await rowsOf('js-poison'))[0].action).to.equal('phi.query');
    expect(await rowsOf('someone-else')).to.have.length(0);
    const metrics = await (await fetch(`${service.internalUrl}/metrics`)).text();
    expect(metrics).to.match(/audit_errors_total\{kind="ingest_rejected"\} [4-9]/);
    const rejections = logLines.filter((line) => line.msg === 'ingest message rejected' && line.subject === subject('js-poison'));
    expect(rejections.find((line) => line.reason === 'body is not JSON')?.stream_seq).to.equal(notJson.seq);
  });
});

describe('JetStream ingestion when Postgres refuses one event of a batch', () => {
  let db: TestDatabase;
  let service: TestService;
  let nc: NatsConnection;
  let js: JetStreamClient;
  let jsm: JetStreamManager;

  const rejectedCount = async () => {
    const metrics = await (await fetch(`${service.internalUrl}/metrics`)).text();
    return Number(/audit_errors_total\{kind="ingest_rejected"\} (\d+)/.exec(metrics)?.[1] ?? 0);
  };
  const storedFor = async (tenants: string[]) =>
    Number((await db.pool.query('SELECT count(*) FROM events WHERE tenant_id = ANY($1)', [tenants])).rows[0].count);

  before(async () => {
    db = await createTestDatabase();
    // A permanent refusal that validation cannot know about, standing for tomorrow's 22xxx or 23xxx.
    await db.pool.query(`ALTER TABLE events ADD CONSTRAINT test_refuses_poison CHECK (user_id <> 'poison')`);
    service = await startTestService({ databaseUrl: db.url, roles: ['ingest'] });
    nc = await connect({ servers: '127.0.0.1:4222' });
    js = jetstream(nc);
    jsm = await jetstreamManager(nc);
  });

  after(async () => {
    await service?.stop();
    await jsm?.streams.delete(`${service.busNamespace.toUpperCase()}_AUDIT_INGEST`).catch(() => undefined);
    await nc?.close();
    await db?.drop();
  });

  it('stores every storable event of every tenant and terminates only the refused one, within seconds', async () => {
    const rejectedBefore = await rejectedCount();
    const tenants = ['split-a', 'split-b', 'split-c'];
    const valid = Array.from({ length: 20 }, (_, index) => producerEvent({ tenant_id: tenants[index % 3] }));
    const poison = producerEvent({ tenant_id: 'split-a', user_id: 'poison' });
    // Published together, so that they are consumed as one batch.
    await Promise.all(
      [...valid.slice(0, 10), poison, ...valid.slice(10)].map((event) =>
        js.publish(`${service.busNamespace}.audit.ingest.${event.tenant_id}`, JSON.stringify(event)),
      ),
    );
    await waitFor(async () => (await storedFor(tenants)) === 20, 'the 20 valid events stored', 10_000);
    await waitFor(
      async () => {
        const info = await jsm.consumers.info(`${service.busNamespace.toUpperCase()}_AUDIT_INGEST`, 'audit-ingest');
        return info.num_ack_pending === 0 && info.num_pending === 0;
      },
      'the refused message terminated rather than redelivered',
      10_000,
    );
    expect(await rejectedCount()).to.equal(rejectedBefore + 1);
    expect(Number((await db.pool.query(`SELECT count(*) FROM events WHERE user_id = 'poison'`)).rows[0].count)).to.equal(0);
  });
});
