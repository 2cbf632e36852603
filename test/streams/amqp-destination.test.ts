import { randomBytes } from 'node:crypto';
import { type Channel, type ChannelModel, connect, type GetMessage } from 'amqplib';
import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { cutBatches } from '../../src/streams/batches.ts';
import type { Destination, EncodedBatch } from '../../src/streams/destinations/destination.ts';
import { itemEncoderOf } from '../../src/streams/destinations/itemEncoders.ts';
import { openDestination } from '../../src/streams/destinations/openDestination.ts';
import { eventRecord, treeHeadRecord } from '../../src/streams/records.ts';
import type { StreamRegistry } from '../../src/streams/streamRegistry.ts';
import type { DestinationInput, StreamFormat } from '../../src/streams/streamRules.ts';
import { StreamRunner } from '../../src/streams/streamRunner.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { OcsfValidator } from '../support/ocsfValidator.ts';
import { freePort } from '../support/ports.ts';
import { PrivateRabbitMq } from '../support/private-rabbitmq.ts';
import { TEST_ENCRYPTION_KEY, testLogger } from '../support/service.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';
import { waitFor } from '../support/wait.ts';

/** The machine's broker: shared, so everything here is named uniquely and deleted after. */
const SHARED_BROKER = 'amqp://127.0.0.1:5672';
const STREAM_ID = 'str_0123456789abcdef0123456789abcdef';
const HEAD = {
  tenant_id: 'tenant-a',
  tree_size: 12,
  root_hash: 'ab'.repeat(32),
  timestamp: '2026-11-02T08:00:05.000Z',
  key_id: 'cd'.repeat(16),
  signature: 'c2ln',
};
const ACTOR = { userId: 'test', userRole: 'operator' };

/** A batch of `count` records of the format for an AMQP destination, led by a tree head. */
function batch(destination: DestinationInput, format: StreamFormat, count: number, firstLeaf = 0): EncodedBatch {
  const records = Array.from({ length: count }, (_, index) => {
    const stored = newEvent({ occurredAtMs: Date.parse('2026-11-02T08:00:00.000Z') + index, action: 'phi.read' });
    return eventRecord(format, 'tenant-a', renderEventDocument(stored, formatTimestamp(stored.occurredAtMs)), firstLeaf + index);
  });
  const encoder = itemEncoderOf(destination, format);
  const span = { streamId: STREAM_ID, tenantId: 'tenant-a', firstLeaf, lastLeaf: firstLeaf + count - 1 };
  return cutBatches(encoder, encoder.limits, span, records, treeHeadRecord(HEAD, firstLeaf))[0]!.encoded;
}

/** Every message in the queue now, in order. */
async function drain(channel: Channel, queue: string): Promise<GetMessage[]> {
  const messages: GetMessage[] = [];
  for (;;) {
    const message = await channel.get(queue, { noAck: true });
    if (message === false) return messages;
    messages.push(message);
  }
}

/**
 * The AMQP 0-9-1 destination against real RabbitMQ: the machine's broker for what it publishes and what it
 * is refused (an exchange and a queue of this file's own, deleted after), and a private node of this file's
 * own for a stream that rides out the broker's crash.
 */
describe('log streams: the AMQP 0-9-1 destination (RabbitMQ)', function () {
  this.timeout(60_000);
  const suffix = randomBytes(6).toString('hex');
  const exchange = `audit-trail-test-${suffix}`;
  const queue = `audit-trail-test-${suffix}`;
  let admin: ChannelModel;
  let channel: Channel;
  const opened: Destination[] = [];
  const settings = (overrides: Partial<Extract<DestinationInput, { type: 'amqp' }>> = {}): DestinationInput => ({
    type: 'amqp',
    url: SHARED_BROKER,
    username: 'guest',
    password: 'guest',
    exchange,
    ...overrides,
  });
  const open = (destination: DestinationInput, format: StreamFormat = 'native') => {
    const opening = openDestination(destination, undefined, { timeoutMs: 5_000, allowPrivateTargets: true }, format);
    opened.push(opening);
    return opening;
  };

  before(async () => {
    admin = await connect(SHARED_BROKER);
    channel = await admin.createChannel();
    await channel.assertExchange(exchange, 'topic', { durable: false, autoDelete: false });
    await channel.assertQueue(queue, { durable: false, exclusive: false });
    await channel.bindQueue(queue, exchange, 'audit.#');
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((destination) => destination.close()));
  });
  after(async () => {
    await channel?.deleteQueue(queue).catch(() => undefined);
    await channel?.deleteExchange(exchange).catch(() => undefined);
    await admin?.close();
  });

  it('publishes each record as a persistent JSON message, in leaf order, to the exchange with the routing key, confirmed', async () => {
    const destination = open(settings());
    const sent = batch(settings(), 'native', 5, 10);
    expect(await destination.send(sent)).to.deep.equal({ kind: 'delivered' });
    const messages = await drain(channel, queue);
    // A native batch is led by its tree head, as in every body of records.
    expect(JSON.parse(messages[0]!.content.toString()).tree_head).to.deep.equal(HEAD);
    const events = messages.slice(1).map((message) => JSON.parse(message.content.toString()));
    expect(events.map((event) => event.leaf_index)).to.deep.equal([10, 11, 12, 13, 14]);
    expect(messages[1]!.fields).to.include({ exchange, routingKey: 'audit.native.tenant-a' });
    expect(messages[1]!.properties).to.include({
      contentType: 'application/json',
      deliveryMode: 2,
      appId: 'audit-trail',
      type: 'audit.event',
    });
    expect(messages[1]!.properties.headers).to.include({ 'x-audit-stream-id': STREAM_ID, 'x-audit-tenant-id': 'tenant-a' });
  });

  it('carries an OCSF batch’s tree head beside the records, in a header of its first message, and only OCSF events', async () => {
    const destination = open(settings({ routing_key: 'audit.siem.{tenant}' }), 'ocsf');
    expect(await destination.send(batch(settings(), 'ocsf', 3))).to.deep.equal({ kind: 'delivered' });
    const messages = await drain(channel, queue);
    expect(messages).to.have.length(3);
    expect(messages[0]!.fields.routingKey).to.equal('audit.siem.tenant-a');
    expect(JSON.parse(String(messages[0]!.properties.headers!['x-audit-tree-head']))).to.deep.equal({ tree_head: HEAD });
    expect(messages[1]!.properties.headers).to.not.have.property('x-audit-tree-head');
    const validator = new OcsfValidator('1.7.0');
    for (const message of messages) expect(validator.problems(JSON.parse(message.content.toString()))).to.deep.equal([]);
  });

  it('is refused when the broker cannot route the records to any queue, rather than lose them', async () => {
    const destination = open(settings({ routing_key: 'nowhere.{tenant}' }));
    const outcome = await destination.send(batch(settings(), 'native', 2));
    expect(outcome.kind).to.equal('refused');
    expect((outcome as { reason: string }).reason).to.match(/^the broker could not route 3 message\(s\) to any queue \(312 NO_ROUTE\)/);
  });

  it('is refused for a missing exchange and wrong credentials; retried while nothing listens', async () => {
    const missing = open(settings({ exchange: `${exchange}-missing` }));
    const noExchange = await missing.send(batch(settings(), 'native', 1));
    expect(noExchange.kind).to.equal('refused');
    expect((noExchange as { reason: string }).reason).to.include('404');
    const wrong = open(settings({ password: 'not-guest' }));
    const refused = await wrong.send(batch(settings(), 'native', 1));
    expect(refused.kind).to.equal('refused');
    expect((refused as { reason: string }).reason).to.include('403');
    const away = open(settings({ url: `amqp://127.0.0.1:${await freePort()}` }));
    const retried = await away.send(batch(settings(), 'native', 1));
    expect(retried.kind).to.equal('retry');
    expect((retried as { reason: string }).reason).to.match(/^connecting: ECONNREFUSED/);
  });

  it('refuses a broker on a private address when private targets are not allowed (the webhooks’ SSRF guard)', async () => {
    const guarded = openDestination(settings(), undefined, { timeoutMs: 5_000, allowPrivateTargets: false }, 'native');
    opened.push(guarded);
    const outcome = await guarded.send(batch(settings(), 'native', 1));
    expect(outcome.kind).to.equal('refused');
    expect((outcome as { reason: string }).reason).to.equal('target refused: host is not a public address');
  });

  describe('a stream whose broker crashes and comes back', function () {
    this.timeout(240_000);
    let broker: PrivateRabbitMq;
    let db: TestDatabase;
    let pool: Database;
    let sealer: TestSealer;
    let registry: StreamRegistry;
    let runner: StreamRunner | undefined;

    before(async () => {
      [broker, db] = await Promise.all([PrivateRabbitMq.start(), createTestDatabase()]);
      pool = new Database({ url: db.url, poolSize: 3, applicationName: 'amqp test', log: testLogger() });
      sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
      registry = testStreamRegistry(pool);
    });
    after(async () => {
      await runner?.stop();
      await sealer?.close();
      await pool?.close();
      await db?.drop();
      await broker?.remove();
    });

    /** A connection to the private broker, for the test's own topology and reading. */
    async function brokerChannel(): Promise<{ model: ChannelModel; channel: Channel }> {
      const model = await connect(broker.url);
      return { model, channel: await model.createChannel() };
    }

    /** Whether the broker takes a connection now (for a failure's message). */
    async function brokerAnswers(): Promise<string> {
      try {
        const { model } = await brokerChannel();
        await model.close();
        return 'yes';
      } catch (error) {
        return `no (${(error as Error).message})`;
      }
    }

    async function write(tenantId: string, count: number, fromMs: number): Promise<void> {
      await seedEvents(
        db.url,
        Array.from({ length: count }, (_, index) => newEvent({ tenantId, occurredAtMs: fromMs + index })),
      );
      await sealer.sealNow();
    }

    it('loses no leaf and keeps each tenant’s order across a crash of the broker mid-stream (publisher confirms)', async () => {
      const setup = await brokerChannel();
      await setup.channel.assertExchange('audit', 'topic', { durable: true });
      await setup.channel.assertQueue('siem', { durable: true });
      await setup.channel.bindQueue('siem', 'audit', 'audit.native.*');
      await setup.model.close();
      const t0 = Date.parse('2026-11-02T08:00:00.000Z');
      await Promise.all([write('north', 3000, t0), write('south', 3000, t0)]);
      const destination = { type: 'amqp', url: broker.url, username: 'guest', password: 'guest', exchange: 'audit' } as const;
      const created = await Promise.all(
        ['north', 'south'].map((tenant) =>
          registry.create(tenant, { destination, start_at: '2026-11-01T00:00:00.000Z', tree_heads: false }, ACTOR),
        ),
      );
      await sealer.sealNow();
      runner = new StreamRunner({
        db: pool,
        secrets: new SecretBox(TEST_ENCRYPTION_KEY),
        destinations: { timeoutMs: 5_000, allowPrivateTargets: true },
        pollMs: 50,
        leaseMs: 10_000,
        capacity: 10,
        failingRetryMs: 500,
        log: testLogger(),
      });
      runner.start();
      // Crashed while the backfill goes: some batches confirmed, one perhaps in flight, the rest to come.
      await waitFor(
        async () => (await registry.state('north', created[0]!.stream.id)).positions.has('north'),
        'a first batch confirmed',
        60_000,
      );
      await broker.stop('crash');
      await write('north', 500, t0 + 60_000);
      await broker.start();
      await write('south', 500, t0 + 60_000);
      for (const [index, tenant] of ['north', 'south'].entries()) {
        const id = created[index]!.stream.id;
        try {
          await waitFor(async () => (await registry.state(tenant, id)).lagEvents === 0, `${tenant} caught up`, 150_000);
        } catch (error) {
          // A suite run timed out here once (north, 150 s; the file took 162 s against ~17 s): what the stream
          // and the broker stood at then is what tells a lost reconnection from a slow one.
          const stream = await pool
            .query(
              `SELECT lease_owner, lease_until, failing_since, last_error, last_delivered_at, now() AS now FROM log_streams WHERE id = $1`,
              [id],
            )
            .then(
              (result) => result.rows,
              (reason: unknown) => `(not readable: ${reason})`,
            );
          const lag = await registry.state(tenant, id).then(
            (state) => state.lagEvents,
            (reason: unknown) => `(not readable: ${reason})`,
          );
          if (error instanceof Error)
            error.message += `\nThe stream: ${JSON.stringify(stream)}; lag ${lag}; broker answering: ${await brokerAnswers()}`;
          throw error;
        }
      }

      const reader = await brokerChannel();
      const messages = await drain(reader.channel, 'siem');
      await reader.model.close();
      for (const tenant of ['north', 'south']) {
        const leaves = messages.map((message) => JSON.parse(message.content.toString())).filter((event) => event.tenant_id === tenant);
        // At least once: a batch in flight at the crash may come twice; its first copies are in leaf order.
        const firstCopies = leaves.map((event) => event.leaf_index as number).filter((leaf, index, all) => all.indexOf(leaf) === index);
        expect(firstCopies, tenant).to.deep.equal(Array.from({ length: 3501 }, (_, leaf) => leaf));
      }
    });
  });
});
