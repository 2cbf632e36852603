import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { ReplicaReads } from '../../src/db/replicaReads.ts';
import { StreamRunner } from '../../src/streams/streamRunner.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent, producerEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer } from '../support/integrity.ts';
import { SplunkHecReceiver } from '../support/siem-receivers.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';
import { PrivateReplica } from '../support/private-replica.ts';
import { PrivatePostgres } from '../support/private-services.ts';
import {
  TEST_ENCRYPTION_KEY,
  TEST_INGEST_TOKEN,
  call,
  mintKey,
  startTestService,
  testLogger,
  type TestService,
} from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * DATABASE_READ_URL against a real streaming replica (pg_basebackup -R of a private primary). Replay on the
 * replica is paused to hold it behind: what a read then sees tells which server answered it.
 */
describe('reads on a streaming replica (DATABASE_READ_URL)', function () {
  this.timeout(120_000);
  let primary: PrivatePostgres;
  let replica: PrivateReplica;
  let db: TestDatabase;
  /** A lag bound no test reaches: reads stay on the replica however far it is held back. READ_REPLICA_READS=all. */
  let patient: TestService;
  /** A bound of one second, READ_REPLICA_READS=all. */
  let strict: TestService;
  /** The default READ_REPLICA_READS (long): only exports without proofs read the replica, pages the primary. */
  let exportsOnly: TestService;
  let key: string;
  const tenantId = 'replica-reads';

  before(async () => {
    primary = await PrivatePostgres.start();
    db = await createTestDatabase(primary.url);
    replica = await PrivateReplica.start(primary);
    const readUrl = `${replica.url}/${db.name}`;
    patient = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'ingest'],
      env: { DATABASE_READ_URL: readUrl, READ_REPLICA_MAX_LAG: '10m', READ_REPLICA_READS: 'all' },
    });
    strict = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      env: { DATABASE_READ_URL: readUrl, READ_REPLICA_MAX_LAG: '1s', READ_REPLICA_READS: 'all' },
    });
    exportsOnly = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      env: { DATABASE_READ_URL: readUrl, READ_REPLICA_MAX_LAG: '10m' },
    });
    key = (await mintKey(db.url, { tenantId, scopes: ['audit:read', 'audit:export'] })).key;
  });

  after(async () => {
    await patient?.stop();
    await strict?.stop();
    await exportsOnly?.stop();
    await db?.pool.end();
    await replica?.remove();
    await primary?.remove();
  });

  async function ingest(): Promise<string> {
    const eventId = randomUUID();
    const response = await call(`${patient.internalUrl}/internal/v1/events`, {
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
      body: { events: [producerEvent({ tenant_id: tenantId, event_id: eventId, timestamp: new Date().toISOString() })] },
    });
    expect(response.status).to.equal(200);
    return eventId;
  }
  const listed = async (service: TestService) =>
    ((await call(`${service.baseUrl}/audit/events?limit=1000`, { key })).json.events as { event_id: string }[]).map(
      (event) => event.event_id,
    );
  const onReplica = async (eventId: string) => (await listed(patient)).includes(eventId);
  const exportedIds = async (service: TestService) => {
    const exported = await call(`${service.baseUrl}/audit/export?format=json`, { key, body: {} });
    expect(exported.status).to.equal(200);
    return (exported.json.events as { event_id: string }[]).map((event) => event.event_id);
  };
  const counted = async (service: TestService) => (await call(`${service.baseUrl}/audit/events/count`, { key })).json.count as number;
  /** The connections a pool of the service holds (db/poolMetrics.ts): 0 for a pool never opened. */
  const poolConnections = (service: TestService, pool: string) => service.metric(`audit_db_pool_connections{pool="${pool}",state="total"}`);

  it('with READ_REPLICA_READS=all serves list pages and exports without proofs from the replica, and a lookup right after a write from the primary', async () => {
    const before = await ingest();
    await waitFor(() => onReplica(before), 'the replica to replay the first event', 20_000, 100);
    await replica.pauseReplay(db.name);
    try {
      const after = await ingest();
      // The producer's lookup of what it has just written: the primary's answer.
      expect((await call(`${patient.baseUrl}/audit/events/${after}`, { key })).status).to.equal(200);
      // The list and the export: the replica's, which has not replayed it.
      const page = await listed(patient);
      expect(page).to.include(before);
      expect(page).to.not.include(after);
      const ids = await exportedIds(patient);
      expect(ids).to.include(before);
      expect(ids).to.not.include(after);
    } finally {
      await replica.resumeReplay(db.name);
    }
    await waitFor(
      async () =>
        (await listed(patient)).length === (await db.pool.query('SELECT 1 FROM events WHERE tenant_id = $1', [tenantId])).rowCount,
      'the replica to catch up',
      20_000,
      100,
    );
  });

  it('by default (READ_REPLICA_READS=long) serves exports without proofs from the replica, and list pages and counts from the primary', async () => {
    const before = await ingest();
    await waitFor(() => onReplica(before), 'the replica to replay the first event', 20_000, 100);
    await replica.pauseReplay(db.name);
    try {
      const after = await ingest();
      const stored = (await db.pool.query('SELECT 1 FROM events WHERE tenant_id = $1', [tenantId])).rowCount;
      // Pages and the count: the primary's, which has the event the replica has not replayed.
      expect(await listed(exportsOnly)).to.include.members([before, after]);
      expect(await counted(exportsOnly)).to.equal(stored);
      // With READ_REPLICA_READS=all the same requests read the replica, one event short.
      expect(await listed(patient)).to.not.include(after);
      expect(await counted(patient)).to.equal(stored! - 1);
      // The export: the replica's.
      const ids = await exportedIds(exportsOnly);
      expect(ids).to.include(before);
      expect(ids).to.not.include(after);
    } finally {
      await replica.resumeReplay(db.name);
    }
    // The pages' replica pool was never opened; the exports' was.
    expect(await poolConnections(exportsOnly, 'replica')).to.equal(0);
    expect(await poolConnections(exportsOnly, 'replica_long_reads')).to.be.greaterThan(0);
    expect(await poolConnections(patient, 'replica')).to.be.greaterThan(0);
  });

  it('reads the primary once the replica lags beyond READ_REPLICA_MAX_LAG, counting each such read', async () => {
    await replica.pauseReplay(db.name);
    try {
      const held = await ingest();
      // Beyond the bound of one second, and past the next measure of the lag (at most a second apart).
      await waitFor(async () => (await listed(strict)).includes(held), 'the strict service to read the primary', 10_000, 250);
      expect(await strict.metric('audit_read_replica_fallbacks_total{reason="lag"}')).to.be.greaterThan(0);
      expect(await strict.metric('audit_read_replica_lag_seconds')).to.be.greaterThan(1);
      // The patient one still reads the replica.
      expect(await listed(patient)).to.not.include(held);
    } finally {
      await replica.resumeReplay(db.name);
    }
    const caughtUp = await ingest();
    await waitFor(() => onReplica(caughtUp), 'the replica to catch up', 20_000, 100);
    // Measured again by the reads that come (at most once a second), and back on the replica.
    await waitFor(
      async () => (await listed(strict)).includes(caughtUp) && (await strict.metric('audit_read_replica_lag_seconds')) < 1,
      'the lag measured small again',
      10_000,
      250,
    );
  });

  it('reads the primary while the replica is down, and answers as usual', async () => {
    await replica.stop();
    try {
      const written = await ingest();
      await waitFor(async () => (await listed(strict)).includes(written), 'a list from the primary', 10_000, 250);
      const exported = await call(`${strict.baseUrl}/audit/export?format=json`, { key, body: {} });
      expect(exported.status).to.equal(200);
      expect(await strict.metric('audit_read_replica_fallbacks_total{reason="unavailable"}')).to.be.greaterThan(0);
    } finally {
      await replica.start();
    }
  });

  it('backfills a log stream from the replica, only below the tree sizes it has replayed, and misses no leaf', async () => {
    const streamed = 'replica-stream';
    const primaryPool = new Database({ url: db.url, poolSize: 3, applicationName: 'replica test', log: testLogger() });
    const replicaPool = new Database({ url: `${replica.url}/${db.name}`, poolSize: 3, applicationName: 'replica test', log: testLogger() });
    const sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    const hec = await new SplunkHecReceiver({ tokens: { good: {} } }).start();
    const runner = new StreamRunner({
      db: primaryPool,
      reads: new ReplicaReads({ primary: primaryPool, replica: replicaPool, maxLagMs: 600_000 }),
      secrets: new SecretBox(TEST_ENCRYPTION_KEY),
      destinations: { timeoutMs: 5_000, allowPrivateTargets: true },
      pollMs: 50,
      leaseMs: 5_000,
      capacity: 10,
      failingRetryMs: 200,
      log: testLogger(),
    });
    const delivered = () => hec.events.filter((event) => event.sourcetype !== 'audit-trail:tree_head').map((event) => event.event);
    const replayedSize = async () =>
      Number(
        (await replicaPool.query<{ size: number }>('SELECT tree_size AS size FROM merkle_trees WHERE tenant_id = $1', [streamed])).rows[0]
          ?.size ?? 0,
      );
    try {
      const start = Date.now() - 60_000;
      await seedEvents(
        db.url,
        Array.from({ length: 5 }, (_, index) => newEvent({ tenantId: streamed, occurredAtMs: start + index })),
      );
      await sealer.sealNow();
      await waitFor(async () => (await replayedSize()) === 5, 'the replica to replay the first leaves', 20_000, 100);
      await replica.pauseReplay(db.name);
      let resumed = false;
      try {
        await seedEvents(
          db.url,
          Array.from({ length: 5 }, (_, index) => newEvent({ tenantId: streamed, occurredAtMs: start + 10 + index })),
        );
        const { stream } = await testStreamRegistry(primaryPool).create(
          streamed,
          { destination: { type: 'splunk_hec', url: hec.url, token: 'good' }, start_at: new Date(start - 1_000).toISOString() },
          { userId: 'test', userRole: 'operator' },
        );
        expect(stream.id).to.match(/^str_/);
        await sealer.sealNow();
        runner.start();
        // The replica has five leaves: five are sent, and the stream waits there for more.
        await waitFor(() => delivered().length === 5, 'the replayed leaves sent', 20_000, 50);
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect(delivered().map((event) => event.leaf_index)).to.deep.equal([0, 1, 2, 3, 4]);
        await replica.resumeReplay(db.name);
        resumed = true;
      } finally {
        if (!resumed) await replica.resumeReplay(db.name);
      }
      // The rest follows once replayed: every leaf once, in order (the creation event's leaf among them).
      await waitFor(() => delivered().length === 11, 'every leaf sent', 20_000, 50);
      expect(delivered().map((event) => event.leaf_index)).to.deep.equal(Array.from({ length: 11 }, (_, index) => index));
    } finally {
      await runner.stop();
      await hec.stop();
      await sealer.close();
      await replicaPool.close();
      await primaryPool.close();
    }
  });
});
