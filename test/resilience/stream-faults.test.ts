import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { sealKeyPair } from '../support/integrity.ts';
import { PrivatePostgres } from '../support/private-services.ts';
import { RoleProcesses } from '../support/roleProcesses.ts';
import { TEST_ENCRYPTION_KEY, startTestService, testLogger, type TestService } from '../support/service.ts';
import { SplunkHecReceiver } from '../support/siem-receivers.ts';
import { waitFor } from '../support/wait.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';

const TENANTS = ['faults-a', 'faults-b'];
/** HEC takes at most this many of our events in a request (1 MB of events of about 600 bytes). */
const MAX_BATCH = 2_000;

/**
 * Log streams through the faults of issue 32, on a Postgres of this file's own: the destination down for two
 * minutes while events keep being written, the streams process killed twice (SIGKILL, a new one started
 * each time), Postgres restarted once. Every event written arrives, in leaf order per tenant; events arrive
 * twice only where the batches in flight at a fault are sent again. The one long test of the suite: about
 * three and a half minutes (two minutes of outage, then the stream's backoff, at most a minute, to notice).
 */
describe('log streams through faults', function () {
  this.timeout(420_000);
  let postgres: PrivatePostgres;
  let db: TestDatabase;
  let pool: Database;
  let sealer: TestService;
  let hec: SplunkHecReceiver;
  const roles = new RoleProcesses();

  before(async () => {
    postgres = await PrivatePostgres.start();
    db = await createTestDatabase(postgres.url);
    pool = new Database({ url: db.url, poolSize: 3, applicationName: 'stream faults test', log: testLogger() });
    sealer = await startTestService({
      databaseUrl: db.url,
      roles: ['sealer'],
      env: { SEAL_SIGNING_KEY: sealKeyPair().privatePem, SEAL_INTERVAL: '500ms' },
    });
    hec = await new SplunkHecReceiver({ tokens: { token: {} } }).start();
  });

  after(async () => {
    roles.killAll();
    await sealer?.stop();
    await hec?.stop();
    await pool?.close();
    await db?.pool.end().catch(() => undefined);
    await postgres?.remove();
  });

  /** The streams role in a process of its own, to be killed by its PID. */
  const startStreams = () =>
    roles.start(
      ['streams'],
      {
        DATABASE_URL: db.url,
        SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        STREAMS_POLL_MS: '100',
        // A killed process's streams move on to the next one after this.
        STREAMS_LEASE_MS: '3000',
        STREAMS_TIMEOUT_MS: '5000',
      },
      '/healthz',
    );
  const kill = (child: ChildProcess) => roles.kill(child);

  /** Writes batches until told to stop; a batch that fails (Postgres away) is written again, same ids, until stored. */
  function startWriting(): { stop: () => Promise<Map<string, string[]>> } {
    const writer = new EventWriter(pool, WEBHOOK_FAN_OUT);
    const written = new Map<string, string[]>(TENANTS.map((tenant) => [tenant, []]));
    let stopped = false;
    const loop = (async () => {
      while (!stopped) {
        for (const tenantId of TENANTS) {
          const batch = Array.from({ length: 10 }, () => newEvent({ tenantId, occurredAtMs: Date.now() }));
          for (;;) {
            try {
              await writer.write(batch, 'test');
              break;
            } catch {
              // The producer's pace (a failed batch is written again after a moment): a load, not a wait.
              await sleep(200);
            }
          }
          written.get(tenantId)!.push(...batch.map((event) => event.eventId));
        }
        // The producer's pace: ten events per tenant every 100 ms is the load, not a wait.
        await sleep(100);
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        await loop;
        return written;
      },
    };
  }

  it('delivers every event, in order, through a 2-minute outage, two kills of the streams process and a Postgres restart', async () => {
    const registry = testStreamRegistry(pool);
    for (const tenantId of TENANTS) {
      await registry.create(
        tenantId,
        { destination: { type: 'splunk_hec', url: hec.url, token: 'token' }, tree_heads: false },
        {
          userId: 'test',
          userRole: 'operator',
        },
      );
    }
    let streams = await startStreams();
    const writing = startWriting();
    await waitFor(() => hec.events.length > 200, 'deliveries flowing', 30_000);

    await hec.stop(); // the destination is down from here for two minutes
    const outageStarted = Date.now();
    // The scenario is a timeline (faults at set moments of a two-minute outage): time itself is what these sleeps spend.
    await sleep(15_000);
    await kill(streams);
    streams = await startStreams();
    await sleep(20_000);
    await postgres.stop('crash');
    await sleep(3_000);
    await postgres.start();
    await sleep(20_000);
    await kill(streams);
    streams = await startStreams();
    await sleep(Math.max(0, 120_000 - (Date.now() - outageStarted)));
    await hec.start(); // on the same port
    await sleep(5_000);
    const written = await writing.stop();

    for (const tenantId of TENANTS) {
      const expected = written.get(tenantId)!;
      await waitFor(
        () => new Set(receivedOf(tenantId).map((event) => event.event_id)).size >= expected.length + 1,
        `every event of ${tenantId} delivered`,
        120_000,
        500,
      );
    }

    for (const tenantId of TENANTS) {
      const received = receivedOf(tenantId);
      // Every event written (and the stream's own creation event) arrived.
      const ids = new Set(received.map((event) => event.event_id));
      for (const id of written.get(tenantId)!) expect(ids.has(id), `event ${id} of ${tenantId}`).to.equal(true);
      // In the tenant's leaf order: the first arrival of each event, in arrival order, is the trail's order.
      const leaves = (
        await pool.query<{ event_id: string }>('SELECT event_id::text FROM merkle_leaves WHERE tenant_id = $1 ORDER BY leaf_index', [
          tenantId,
        ])
      ).rows.map((row) => row.event_id);
      const seen = new Set<string>();
      const firstArrivals = received
        .filter((event) => !seen.has(event.event_id) && seen.add(event.event_id))
        .map((event) => event.event_id);
      expect(firstArrivals).to.deep.equal(leaves.slice(leaves.length - firstArrivals.length));
      // Repeats only where batches in flight were sent again: the leaf index goes back at most once per fault
      // (two kills, one Postgres restart), each time by at most two batches (the one sent and the one before
      // it, whose position may not have committed), to resend what directly follows.
      const rewinds: number[] = [];
      let highest = -1;
      for (const { leaf_index: leaf } of received) {
        if (leaf <= highest) rewinds.push(highest - leaf + 1);
        highest = Math.max(highest, leaf);
      }
      expect(rewinds.length, `rewinds of ${tenantId}`).to.be.at.most(3);
      for (const length of rewinds) expect(length, `a rewind of ${tenantId}`).to.be.at.most(2 * MAX_BATCH);
      expect(received.length - ids.size, `repeated events of ${tenantId}`).to.be.at.most(rewinds.reduce((sum, length) => sum + length, 0));
    }
  });

  /** The native records HEC indexed for a tenant, in arrival order. */
  function receivedOf(tenantId: string): Array<{ event_id: string; leaf_index: number }> {
    return hec.events.filter((event) => event.event.tenant_id === tenantId).map((event) => event.event);
  }
});
