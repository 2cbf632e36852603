import { Writable } from 'node:stream';
import { expect } from 'chai';
import pg from 'pg';
import { runStreams } from '../../src/cli/streamsCommand.ts';
import { Database } from '../../src/db/database.ts';
import { ServiceMetrics } from '../../src/platform/metrics.ts';
import { type StreamRegistry, streamState } from '../../src/streams/streamRegistry.ts';
import { leafIngestedAt } from '../../src/integrity/treeStore.ts';
import { StreamRunner } from '../../src/streams/streamRunner.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { TEST_ENCRYPTION_KEY, testConfig, testLogger } from '../support/service.ts';
import { DatadogReceiver, SplunkHecReceiver } from '../support/siem-receivers.ts';
import { ManualClock } from '../support/manual-clock.ts';
import { waitFor } from '../support/wait.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';

const ACTOR = { userId: 'test', userRole: 'operator' };
const T0 = Date.parse('2026-11-02T08:00:00.000Z');

/**
 * The streams role against a real database, a real sealer and loopback SIEM receivers: what is delivered,
 * in which order, from which start, and what happens when the destination is busy, refuses, or the stream
 * is paused.
 */
describe('log streams: the streams role', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let pool: Database;
  let sealer: TestSealer;
  let registry: StreamRegistry;
  let hec: SplunkHecReceiver;
  const runners: StreamRunner[] = [];

  before(async () => {
    db = await createTestDatabase();
    pool = new Database({ url: db.url, poolSize: 4, applicationName: 'streams test', log: testLogger() });
    sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    registry = testStreamRegistry(pool);
  });
  beforeEach(async () => {
    hec = await new SplunkHecReceiver({ tokens: { good: {}, other: {} } }).start();
  });
  afterEach(async () => {
    await Promise.all(runners.splice(0).map((runner) => runner.stop()));
    await hec.stop();
  });
  after(async () => {
    await sealer?.close();
    await pool?.close();
    await db?.drop();
  });

  function runner(metrics?: ServiceMetrics, identity?: string): StreamRunner {
    const started = new StreamRunner({
      db: pool,
      secrets: new SecretBox(TEST_ENCRYPTION_KEY),
      destinations: { timeoutMs: 5_000, allowPrivateTargets: true },
      pollMs: 50,
      leaseMs: 5_000,
      capacity: 100,
      failingRetryMs: 200,
      log: testLogger(),
      metrics,
      identity,
    });
    started.start();
    runners.push(started);
    return started;
  }

  async function write(tenantId: string, count: number, overrides: Parameters<typeof newEvent>[0] = {}, startMs = T0) {
    const events = Array.from({ length: count }, (_, index) => newEvent({ tenantId, occurredAtMs: startMs + index, ...overrides }));
    await seedEvents(db.url, events);
    await sealer.sealNow();
    return events;
  }

  const delivered = (receiver: SplunkHecReceiver, tenantId: string) =>
    receiver.events
      .filter((event) => event.sourcetype !== 'audit-trail:tree_head' && event.event.tenant_id === tenantId)
      .map((event) => event.event);

  it('delivers a tenant’s trail from its creation on, in leaf order, each batch led by the latest tree head, and follows new events', async () => {
    await write('early', 5);
    const { stream } = await registry.create('early', { destination: { type: 'splunk_hec', url: hec.url, token: 'good' } }, ACTOR);
    await sealer.sealNow();
    const metrics = new ServiceMetrics();
    runner(metrics);
    // The admin.stream.create event is the first: written with the stream, after the five before it.
    await waitFor(() => delivered(hec, 'early').length === 1, 'the creation event delivered');
    expect(delivered(hec, 'early')[0]).to.include({ action: 'admin.stream.create', resource_id: stream.id, leaf_index: 5 });
    const later = await write('early', 30, {}, T0 + 60_000);
    await waitFor(() => delivered(hec, 'early').length === 31, 'the later events delivered');
    const events = delivered(hec, 'early');
    expect(events.slice(1).map((event) => event.event_id)).to.deep.equal(later.map((event) => event.eventId));
    expect(events.map((event) => event.leaf_index)).to.deep.equal(Array.from({ length: 31 }, (_, index) => 5 + index));
    const heads = hec.events.filter((event) => event.sourcetype === 'audit-trail:tree_head');
    expect(heads.length).to.be.greaterThan(0);
    expect(heads.at(-1)!.event.tree_head).to.include({ tenant_id: 'early', tree_size: 36 });
    // The receiver acknowledges a batch before the position moves past it.
    await waitFor(async () => (await registry.state('early', stream.id)).lagEvents === 0, 'the position past the last batch');
    const state = await registry.state('early', stream.id);
    expect(state).to.include({ status: 'active', lagEvents: 0, lagSeconds: 0 });
    expect(state.positions.get('early')).to.equal(36);
    expect((await metrics.registry.getSingleMetric('audit_stream_events_delivered_total')!.get()).values[0]!.value).to.equal(31);
  });

  it('takes up a created stream and lets a paused one go at once: woken by a notification, not the next poll', async () => {
    await write('woken', 3);
    const started = new StreamRunner({
      db: pool,
      secrets: new SecretBox(TEST_ENCRYPTION_KEY),
      destinations: { timeoutMs: 5_000, allowPrivateTargets: true },
      pollMs: 60_000,
      leaseMs: 120_000,
      capacity: 100,
      failingRetryMs: 200,
      log: testLogger(),
      databaseUrl: db.url,
    });
    started.start();
    runners.push(started);
    // Its first passes (at start, and when its LISTEN connection is up) found no stream; the next poll is a minute away.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const destination = { type: 'splunk_hec', url: hec.url, token: 'good' };
    const { stream } = await registry.create('woken', { destination, start_at: '2026-01-01T00:00:00Z' }, ACTOR);
    await waitFor(() => delivered(hec, 'woken').length === 3, 'the new stream delivered', 5_000);
    // (It holds the other tests' streams too: it takes every stream of the database.)
    expect(started.held).to.include(stream.id);
    await registry.pause('woken', stream.id, ACTOR);
    await waitFor(() => !started.held.includes(stream.id), 'the paused stream let go', 5_000);
  });

  it('backfills from a past instant, and passes over what the filter leaves out', async () => {
    await write('backfill', 10, { action: 'phi.read' }, T0 - 86_400_000);
    await write('backfill', 10, { action: 'admin.key.create', phiInvolved: false, fieldsAccessed: '' }, T0);
    const { stream } = await registry.create(
      'backfill',
      {
        destination: { type: 'splunk_hec', url: hec.url, token: 'good' },
        start_at: '2026-01-01T00:00:00Z',
        filter: { action_prefixes: ['phi.'] },
        tree_heads: false,
      },
      ACTOR,
    );
    runner();
    await waitFor(async () => (await registry.state('backfill', stream.id)).positions.get('backfill') === 20, 'the whole trail passed');
    const events = delivered(hec, 'backfill');
    expect(events.map((event) => event.action)).to.deep.equal(Array(10).fill('phi.read'));
    expect(events.map((event) => event.leaf_index)).to.deep.equal([...Array(10).keys()]);
    expect(hec.events.some((event) => event.sourcetype === 'audit-trail:tree_head')).to.equal(false);
  });

  it('sends the next batch while the position of the one before commits, and the one after only once it has', async () => {
    // Events of 300 KB: three to a batch of HEC's 1 MB, so that ten make four batches.
    const large = `{"note":"${'x'.repeat(300_000)}"}`;
    await write('pipelined', 10, { details: large }, T0 - 86_400_000);
    const { stream } = await registry.create(
      'pipelined',
      { destination: { type: 'splunk_hec', url: hec.url, token: 'good' }, start_at: '2026-01-01T00:00:00Z', tree_heads: false },
      ACTOR,
    );
    await sealer.sealNow();
    // The stream's position row, made now (where its first pass would make it) and locked by this test: every
    // position update waits for the lock, as a slow commit would.
    await pool.query('INSERT INTO log_stream_positions (stream_id, tenant_id, next_leaf) VALUES ($1, $2, 0)', [stream.id, 'pipelined']);
    const lock = new pg.Client({ connectionString: db.url });
    await lock.connect();
    try {
      await lock.query('BEGIN');
      await lock.query('SELECT 1 FROM log_stream_positions WHERE stream_id = $1 FOR UPDATE', [stream.id]);
      runner();
      await waitFor(() => delivered(hec, 'pipelined').length === 6, 'the second batch sent while the first one’s position commits');
      // Held while the first batch's position is not committed: at most one batch past the durable position.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(delivered(hec, 'pipelined').length).to.equal(6);
      expect((await registry.state('pipelined', stream.id)).positions.get('pipelined')).to.equal(0);
    } finally {
      await lock.query('ROLLBACK');
      await lock.end();
    }
    await waitFor(async () => (await registry.state('pipelined', stream.id)).positions.get('pipelined') === 11, 'the whole trail passed');
    expect(delivered(hec, 'pipelined').map((event) => event.leaf_index)).to.deep.equal([...Array(11).keys()]);
  });

  it('retries a busy destination, and after a refusal is failing until the destination is fixed, then goes on where it stopped', async () => {
    await write('flaky', 3);
    const { stream } = await registry.create(
      'flaky',
      { destination: { type: 'splunk_hec', url: hec.url, token: 'good' }, start_at: '2026-01-01T00:00:00Z' },
      ACTOR,
    );
    await sealer.sealNow();
    hec.mode = 'busy';
    runner();
    await waitFor(async () => (await registry.state('flaky', stream.id)).stream.lastError !== null, 'the busy answer recorded');
    expect((await registry.state('flaky', stream.id)).status).to.equal('active');
    hec.mode = 'unauthorized';
    await waitFor(async () => (await registry.state('flaky', stream.id)).status === 'failing', 'the stream failing');
    const failing = await registry.state('flaky', stream.id);
    expect(failing.stream.lastError).to.equal('HEC answered 403 (code 4: Invalid token)');
    expect(failing.lagEvents).to.equal(4);
    hec.mode = 'normal';
    await waitFor(async () => (await registry.state('flaky', stream.id)).status === 'active', 'the stream delivering again');
    await waitFor(() => delivered(hec, 'flaky').length === 4, 'every event delivered');
    expect(delivered(hec, 'flaky').map((event) => event.leaf_index)).to.deep.equal([0, 1, 2, 3]);
  });

  it('shows the lag of a stream whose destination is down growing in its gauges, back to 0 once delivered, and drops them when it lets the stream go', async () => {
    await write('down', 2);
    const { stream } = await registry.create(
      'down',
      { destination: { type: 'splunk_hec', url: hec.url, token: 'good' }, start_at: '2026-01-01T00:00:00Z' },
      ACTOR,
    );
    await sealer.sealNow();
    hec.mode = 'busy';
    const metrics = new ServiceMetrics();
    const held = runner(metrics);
    const gauge = async (name: string) =>
      (await metrics.registry.getSingleMetric(name)!.get()).values.find((value) => value.labels.stream === stream.id)?.value;
    // Not one batch accepted: the two events and the stream's creation wait, and so do the five written since.
    await waitFor(async () => (await gauge('audit_stream_lag_events')) === 3, 'the lag of the first failed pass');
    await write('down', 5, {}, T0 + 60_000);
    await waitFor(async () => (await gauge('audit_stream_lag_events')) === 8, 'the lag grown while the destination is down', 10_000);
    expect(await gauge('audit_stream_lag_seconds')).to.be.greaterThan(0);
    expect(delivered(hec, 'down')).to.deep.equal([]);
    // Delivering again: the passes that go through report their own positions, down to nothing left.
    hec.mode = 'normal';
    await waitFor(async () => (await gauge('audit_stream_lag_events')) === 0, 'the lag gone once delivered', 10_000);
    expect(delivered(hec, 'down')).to.have.length(8);
    expect(await gauge('audit_stream_lag_seconds')).to.equal(0);
    await registry.pause('down', stream.id, ACTOR);
    await waitFor(() => !held.held.includes(stream.id), 'the paused stream let go');
    expect(await gauge('audit_stream_lag_events')).to.equal(undefined);
    expect(await gauge('audit_stream_lag_seconds')).to.equal(undefined);
  });

  it('loses nothing while paused, and a resume delivers what was written meanwhile', async () => {
    const { stream } = await registry.create('paused', { destination: { type: 'splunk_hec', url: hec.url, token: 'good' } }, ACTOR);
    await sealer.sealNow();
    runner();
    await waitFor(() => delivered(hec, 'paused').length === 1, 'the creation event delivered');
    await registry.pause('paused', stream.id, ACTOR);
    const written = await write('paused', 25);
    await sealer.sealNow();
    // Paused: its process lets it go; nothing more arrives however long it waits (here, several passes).
    await waitFor(async () => (await registry.state('paused', stream.id)).lagEvents === 26, 'the backlog counted');
    expect(delivered(hec, 'paused').length).to.equal(1);
    // lag_seconds: the age of the oldest leaf not yet delivered (leaf 1, the pause), whatever came after it.
    const oldest = (await leafIngestedAt(pool, 'paused', 1))!.getTime();
    const { stream: paused } = await registry.state('paused', stream.id);
    expect((await streamState(pool, paused, new ManualClock(oldest + 90_400))).lagSeconds).to.equal(90);
    expect((await streamState(pool, paused, new ManualClock(oldest + 3_600_000))).lagSeconds).to.equal(3600);
    await registry.resume('paused', stream.id, ACTOR);
    await sealer.sealNow();
    await waitFor(() => delivered(hec, 'paused').length === 28, 'the pause, the 25 events and the resume delivered');
    const actions = delivered(hec, 'paused').map((event) => event.action);
    expect(actions[1]).to.equal('admin.stream.pause');
    expect(actions.at(-1)).to.equal('admin.stream.resume');
    expect(
      delivered(hec, 'paused')
        .slice(2, 27)
        .map((event) => event.event_id),
    ).to.deep.equal(written.map((event) => event.eventId));
  });

  it('shares streams between processes: a stream is delivered by one of them, and by another when that one stops', async () => {
    await write('shared', 5);
    const { stream } = await registry.create(
      'shared',
      { destination: { type: 'splunk_hec', url: hec.url, token: 'good' }, start_at: '2026-01-01T00:00:00Z' },
      ACTOR,
    );
    await sealer.sealNow();
    const first = runner(undefined, 'first');
    const second = runner(undefined, 'second');
    await waitFor(() => delivered(hec, 'shared').length === 6, 'delivered once');
    expect([first.held, second.held].filter((held) => held.includes(stream.id))).to.have.length(1);
    const holder = first.held.includes(stream.id) ? first : second;
    const other = holder === first ? second : first;
    await holder.stop();
    runners.splice(runners.indexOf(holder), 1);
    await write('shared', 5);
    await waitFor(() => delivered(hec, 'shared').length === 11, 'delivered by the other process');
    expect(other.held).to.include(stream.id);
    expect(new Set(delivered(hec, 'shared').map((event) => event.event_id)).size).to.equal(11);
  });

  it('streams OCSF to Datadog', async () => {
    const datadog = await new DatadogReceiver({ apiKeys: ['dd'] }).start();
    try {
      await write('ocsf', 3);
      await registry.create(
        'ocsf',
        { destination: { type: 'datadog', url: datadog.url, api_key: 'dd' }, format: 'ocsf', start_at: '2026-01-01T00:00:00Z' },
        ACTOR,
      );
      await sealer.sealNow();
      runner();
      await waitFor(() => datadog.logs.filter((log) => log.ocsf).length === 4, 'delivered');
      const logs = datadog.logs.filter((log) => log.ocsf);
      expect(logs.map((log) => log.ocsf.metadata.sequence)).to.deep.equal([0, 1, 2, 3]);
      expect(logs[0]!.ocsf).to.include({ class_uid: 6005 });
      expect(logs[3]!.ocsf).to.include({ class_uid: 3004, activity_name: 'Create' });
    } finally {
      await datadog.stop();
    }
  });

  it('audit-trail streams status lists every stream with its state and lag, and exits 1 while one is failing', async () => {
    const { stream } = await registry.create('cli', { destination: { type: 'splunk_hec', url: hec.url, token: 'other-token' } }, ACTOR);
    await sealer.sealNow();
    runner();
    await waitFor(async () => (await registry.state('cli', stream.id)).status === 'failing', 'the stream failing');
    let text = '';
    const out = new Writable({
      write(chunk, _encoding, done) {
        text += String(chunk);
        done();
      },
    });
    const code = await runStreams(['status', '--json', '--tenant', 'cli'], testConfig(db.url), testLogger(), out);
    expect(code).to.equal(1);
    const { streams } = JSON.parse(text);
    expect(streams).to.have.length(1);
    expect(streams[0]).to.include({ id: stream.id, status: 'failing', owner: 'cli', destination: 'splunk_hec', lag_events: 1 });
    expect(streams[0].last_error).to.equal('HEC answered 403 (code 4: Invalid token)');
    expect(text).not.to.include('other-token');
  });
});
