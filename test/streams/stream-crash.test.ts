import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { RoleProcesses } from '../support/roleProcesses.ts';
import { TEST_ENCRYPTION_KEY, testLogger } from '../support/service.ts';
import { SplunkHecReceiver } from '../support/siem-receivers.ts';
import { waitFor } from '../support/wait.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';

const TENANT = 'crashed';
/** Events of 300 KB: three to a batch of HEC's 1 MB. */
const PER_BATCH = 3;
const EVENTS = 30;

/** A HEC that lets the test act at the moment it answers a batch (before the answer leaves, or just after). */
class HookedHec extends SplunkHecReceiver {
  onAnswer: ((answered: number) => void) | undefined;
  /** Batches answered 200. */
  answered = 0;

  protected override answer(request: IncomingMessage, body: Buffer) {
    const answer = super.answer(request, body);
    if (answer.status === 200) {
      this.answered += 1;
      this.onAnswer?.(this.answered);
    }
    return answer;
  }
}

/**
 * A backfill through two SIGKILLs of the streams process, each at a moment where the next batch may be in
 * flight while the position of the one before commits (streams/streamWorker.ts): just after the destination
 * answered a batch, and while it answers one. Nothing is skipped; what repeats is at most the two batches in
 * flight at each kill.
 */
describe('log streams: the streams process killed mid-backfill', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let pool: Database;
  let sealer: TestSealer;
  let hec: HookedHec;
  const roles = new RoleProcesses();

  before(async () => {
    db = await createTestDatabase();
    pool = new Database({ url: db.url, poolSize: 3, applicationName: 'stream crash test', log: testLogger() });
    sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    hec = await new HookedHec({ tokens: { token: {} } }).start();
  });

  after(async () => {
    roles.killAll();
    await hec?.stop();
    await sealer?.close();
    await pool?.close();
    await db?.drop();
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
        STREAMS_LEASE_MS: '2000',
      },
      '/healthz',
    );

  it('delivers every event in leaf order; each kill repeats at most the two batches in flight', async () => {
    const large = `{"note":"${'x'.repeat(300_000)}"}`;
    const T0 = Date.parse('2026-11-02T08:00:00.000Z');
    await seedEvents(
      db.url,
      Array.from({ length: EVENTS }, (_, index) => newEvent({ tenantId: TENANT, occurredAtMs: T0 + index, details: large })),
    );
    const registry = testStreamRegistry(pool);
    await registry.create(
      TENANT,
      { destination: { type: 'splunk_hec', url: hec.url, token: 'token' }, start_at: '2026-01-01T00:00:00Z', tree_heads: false },
      { userId: 'test', userRole: 'operator' },
    );
    await sealer.sealNow();
    const total = EVENTS + 1; // and the stream's own creation event

    // First kill: just after the third batch's answer left, while its position commits and the fourth goes.
    let streams = await startStreams();
    let killed = once(streams, 'exit');
    const first = streams;
    hec.onAnswer = (answered) => {
      if (answered === 3) setImmediate(() => first.kill('SIGKILL'));
    };
    await killed;
    // Second kill: while the destination answers the new process's second batch (the answer never reaches it).
    const answeredBefore = hec.answered;
    streams = await startStreams();
    killed = once(streams, 'exit');
    const second = streams;
    hec.onAnswer = (answered) => {
      if (answered >= answeredBefore + 2) second.kill('SIGKILL');
    };
    await killed;
    hec.onAnswer = undefined;
    await startStreams();
    await waitFor(() => new Set(receivedLeaves()).size === total, 'every event delivered', 60_000, 200);

    const received = receivedLeaves();
    // Nothing skipped: the first arrival of each leaf, in arrival order, is the trail's order.
    const seen = new Set<number>();
    const firstArrivals = received.filter((leaf) => !seen.has(leaf) && seen.add(leaf));
    expect(firstArrivals).to.deep.equal([...Array(total).keys()]);
    // Repeats only of what was in flight at a kill: the leaf index goes back at most once per kill, each time
    // by at most two batches (the batch sent and the one before it, whose position may not have committed).
    const rewinds: number[] = [];
    let highest = -1;
    received.forEach((leaf, index) => {
      if (index > 0 && leaf <= received[index - 1]!) rewinds.push(highest - leaf + 1);
      highest = Math.max(highest, leaf);
    });
    expect(rewinds.length, 'rewinds').to.be.at.most(2);
    for (const length of rewinds) expect(length, 'a rewind').to.be.at.most(2 * PER_BATCH);
    expect(received.length - total, 'repeated events').to.be.at.most(rewinds.reduce((sum, length) => sum + length, 0));
  });

  /** The leaf indexes HEC indexed for the tenant, in arrival order. */
  function receivedLeaves(): number[] {
    return hec.events.filter((event) => event.event.tenant_id === TENANT).map((event) => event.event.leaf_index as number);
  }
});
