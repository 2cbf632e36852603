import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { cutBatches } from '../../src/streams/batches.ts';
import type { Destination, EncodedBatch } from '../../src/streams/destinations/destination.ts';
import { itemEncoderOf } from '../../src/streams/destinations/itemEncoders.ts';
import { openDestination } from '../../src/streams/destinations/openDestination.ts';
import { eventRecord } from '../../src/streams/records.ts';
import type { StreamRegistry } from '../../src/streams/streamRegistry.ts';
import { StreamRunner } from '../../src/streams/streamRunner.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { TEST_ENCRYPTION_KEY, testLogger } from '../support/service.ts';
import { SplunkHecReceiver } from '../support/siem-receivers.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';
import { waitFor } from '../support/wait.ts';

const ACTOR = { userId: 'test', userRole: 'operator' };
const STREAM_ID = 'str_0123456789abcdef0123456789abcdef';
const HEC = { type: 'splunk_hec', token: 'ack-token' } as const;

/** The event requests HEC received (gzipped), without the ack queries. */
const eventPosts = (hec: SplunkHecReceiver) => hec.requests.filter((request) => request.headers['content-encoding'] === 'gzip');

/** One batch of `count` native records for HEC, leaves from 0. */
function batch(count: number): EncodedBatch {
  const records = Array.from({ length: count }, (_, index) => {
    const stored = newEvent({ occurredAtMs: Date.parse('2026-11-02T08:00:00.000Z') + index });
    return eventRecord('native', 'tenant-a', renderEventDocument(stored, formatTimestamp(stored.occurredAtMs)), index);
  });
  const span = { streamId: STREAM_ID, tenantId: 'tenant-a', firstLeaf: 0, lastLeaf: count - 1 };
  const encoder = itemEncoderOf({ ...HEC, url: 'https://unused' }, 'native');
  return cutBatches(encoder, encoder.limits, span, records, undefined)[0]!.encoded;
}

/**
 * Splunk HEC's indexer acknowledgement against a loopback HEC that implements it (test/support/siem-receivers.ts):
 * a batch HEC took with an ackId is delivered only once /services/collector/ack says so, and goes again when
 * the acknowledgement does not come in time or HEC loses the channel.
 */
describe('log streams: Splunk HEC indexer acknowledgement', function () {
  this.timeout(30_000);
  let hec: SplunkHecReceiver;
  const opened: Destination[] = [];
  const open = (hecAckTimeoutMs: number) => {
    const destination = openDestination(
      { ...HEC, url: hec.url },
      undefined,
      { timeoutMs: 5_000, allowPrivateTargets: true, hecAckTimeoutMs },
      'native',
    );
    opened.push(destination);
    return destination;
  };
  beforeEach(async () => {
    hec = await new SplunkHecReceiver({ tokens: { 'ack-token': { ack: true }, 'plain-token': {} } }).start();
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((destination) => destination.close()));
    await hec.stop();
  });

  it('is delivered only when the ack query says the batch is indexed, on the channel it was sent on', async () => {
    hec.ackMode = 'late';
    hec.ackDelayMs = 400;
    const startedAt = Date.now();
    expect(await open(10_000).send(batch(3))).to.deep.equal({ kind: 'delivered' });
    expect(Date.now() - startedAt).to.be.at.least(400);
    const channel = eventPosts(hec)[0]!.headers['x-splunk-request-channel'];
    // Queried until indexed: more than once, each naming the batch's ackId 0 on the batch's channel.
    expect(hec.ackQueries.length).to.be.greaterThan(1);
    expect(hec.ackQueries.every((query) => query.channel === channel && query.acks.join() === '0')).to.equal(true);
  });

  it('goes again when no acknowledgement comes within the ack timeout', async () => {
    hec.ackMode = 'never';
    const outcome = await open(300).send(batch(2));
    expect(outcome.kind).to.equal('retry');
    expect((outcome as { reason: string }).reason).to.match(/^HEC did not acknowledge ackId 0 within 0 s .*: sending again$/);
    expect(hec.ackQueries.length).to.be.greaterThan(0);
  });

  it('goes again, on a new channel, when HEC has lost the channel (a restart)', async () => {
    hec.ackMode = 'late';
    hec.ackDelayMs = 60_000;
    const destination = open(10_000);
    const sending = destination.send(batch(2));
    await waitFor(() => eventPosts(hec).length === 1, 'the batch posted');
    hec.loseChannels();
    const outcome = await sending;
    expect(outcome).to.deep.include({ kind: 'retry' });
    expect((outcome as { reason: string }).reason).to.match(
      /^HEC lost the channel before acknowledging ackId 0 \(code 11: Invalid data channel\)/,
    );
    hec.ackMode = 'prompt';
    expect(await destination.send(batch(2))).to.deep.equal({ kind: 'delivered' });
    const channels = eventPosts(hec).map((request) => request.headers['x-splunk-request-channel']);
    expect(channels).to.have.length(2);
    expect(channels[1]).to.not.equal(channels[0]);
  });

  it('takes a 200 without an ackId (a token without acknowledgement) as delivered, asking nothing more', async () => {
    const destination = openDestination(
      { ...HEC, token: 'plain-token', url: hec.url },
      undefined,
      { timeoutMs: 5_000, allowPrivateTargets: true },
      'native',
    );
    opened.push(destination);
    expect(await destination.send(batch(2))).to.deep.equal({ kind: 'delivered' });
    expect(hec.ackQueries).to.have.length(0);
  });

  describe('a stream', () => {
    let db: TestDatabase;
    let pool: Database;
    let sealer: TestSealer;
    let registry: StreamRegistry;
    let runner: StreamRunner | undefined;

    before(async () => {
      db = await createTestDatabase();
      pool = new Database({ url: db.url, poolSize: 3, applicationName: 'hec ack test', log: testLogger() });
      sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
      registry = testStreamRegistry(pool);
    });
    afterEach(async () => {
      await runner?.stop();
      runner = undefined;
    });
    after(async () => {
      await sealer?.close();
      await pool?.close();
      await db?.drop();
    });

    it('moves its position only after HEC acknowledges, and sends the batch again while it does not', async () => {
      const events = Array.from({ length: 5 }, (_, index) =>
        newEvent({ tenantId: 'acked', occurredAtMs: Date.parse('2026-11-02T08:00:00.000Z') + index }),
      );
      await seedEvents(db.url, events);
      await sealer.sealNow();
      const { stream } = await registry.create(
        'acked',
        { destination: { ...HEC, url: hec.url }, start_at: '2026-11-01T00:00:00.000Z', tree_heads: false },
        ACTOR,
      );
      await sealer.sealNow();
      hec.ackMode = 'never';
      runner = new StreamRunner({
        db: pool,
        secrets: new SecretBox(TEST_ENCRYPTION_KEY),
        destinations: { timeoutMs: 5_000, allowPrivateTargets: true, hecAckTimeoutMs: 200 },
        pollMs: 50,
        leaseMs: 5_000,
        capacity: 10,
        failingRetryMs: 200,
        log: testLogger(),
      });
      runner.start();
      // The same batch, twice: the first was never acknowledged.
      await waitFor(() => eventPosts(hec).length >= 2, 'the batch sent again', 15_000);
      const before = await registry.state('acked', stream.id);
      expect(before.positions.get('acked') ?? 0, 'no position past an unacknowledged batch').to.equal(0);
      expect(before.lagEvents).to.equal(6);
      expect(before.stream.lastError).to.match(/^HEC did not acknowledge ackId \d+/);
      hec.ackMode = 'prompt';
      await waitFor(
        async () => (await registry.state('acked', stream.id)).positions.get('acked') === 6,
        'the position past the acknowledged batch',
        15_000,
      );
      const leaves = hec.events.map((event) => event.event.leaf_index as number);
      expect(new Set(leaves)).to.deep.equal(new Set([0, 1, 2, 3, 4, 5]));
    });
  });
});
