import { expect } from 'chai';
import pg from 'pg';
import { takeDueDeliveries, timeUntilNextDue } from '../../src/delivery/deliveryOutbox.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair } from '../support/integrity.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { TEST_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * Issue 42, item 2: an idle deployment rests (the relay ran its two outbox statements about 48 times a
 * second with nothing to do, whatever DELIVERY_RELAY_POLL_MS said), and deliveries still start on time:
 * LISTEN wake-ups and a timer to the next due time, not polling. The figures are bench/idle.ts's.
 */
describe('an idle relay rests, and deliveries still start on time', function () {
  this.timeout(90_000);
  let db: TestDatabase;

  before(async () => {
    db = await createTestDatabase();
  });

  after(async () => {
    await db?.drop();
  });

  it('says "nothing waits" for an empty outbox, not "due now"', async () => {
    expect(await timeUntilNextDue(db.pool)).to.equal(undefined);
    const pass = await takeDueDeliveries(db.pool, 10);
    expect(pass.due).to.deep.equal([]);
    expect(pass.nextDueInMs).to.equal(undefined);
  });

  describe('every role but the api and the controller in one process, with the default poll', () => {
    let service: TestService;
    let target: TestReceiver;
    const database = () => new URL(db.url).pathname.slice(1);

    before(async () => {
      target = await startReceiver();
      target.reply((delivery) => (delivery.headers['x-service-delivery-attempt'] === '1' ? 503 : 204));
      service = await startTestService({
        databaseUrl: db.url,
        roles: ['ingest', 'relay', 'worker', 'sealer', 'streams', 'retention'],
        env: {
          WEBHOOK_ALLOW_HTTP: 'true',
          WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
          DELIVERY_SCHEDULE: '1s,1s',
          SEAL_SIGNING_KEY: sealKeyPair().privatePem,
        },
      });
    });

    after(async () => {
      await service?.stop();
      await target?.close();
    });

    /** Transactions of the test database so far, read from another database so that reading is not counted. */
    async function transactions(): Promise<number> {
      const admin = new pg.Client({ connectionString: db.url.replace(/\/[^/]*$/, '/postgres') });
      await admin.connect();
      try {
        const { rows } = await admin.query('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1', [
          database(),
        ]);
        return Number(rows[0].n);
      } finally {
        await admin.end();
      }
    }

    it('costs at most a transaction a second with nothing to do', async () => {
      // Settled: every loop has made its first passes, and the start's own statements are counted (a backend
      // flushes its counts when it goes idle, at most once a second; one that stays idle, within 10 s).
      await new Promise((resolve) => setTimeout(resolve, 11_000));
      const before = await transactions();
      await new Promise((resolve) => setTimeout(resolve, 12_000));
      const perSecond = ((await transactions()) - before) / 12;
      expect(perSecond, `${perSecond.toFixed(2)} transactions/s`).to.be.at.most(1);
    });

    it('starts a retry within 50 ms of its due time, though the relay polls only every 30 s', async () => {
      const id = `wh_${'c'.repeat(32)}`;
      await db.pool.query(`INSERT INTO webhook_endpoints (id, tenant_id, url, secret_ciphertext) VALUES ($1, 'idle', $2, $3)`, [
        id,
        target.url,
        new SecretBox(TEST_ENCRYPTION_KEY).seal('e'.repeat(64)),
      ]);
      const events = Array.from({ length: 3 }, () => newEvent({ tenantId: 'idle' }));
      await seedEvents(db.url, events);
      // Attempt 1 fails at once (the write woke the relay); its outcome sets the retry's due time.
      const dueAt = new Map<string, number>();
      await waitFor(
        async () => {
          const { rows } = await db.pool.query(
            `SELECT event_id::text, due_at FROM deliveries WHERE endpoint_id = $1 AND attempts = 1 AND state = 'pending'`,
            [id],
          );
          for (const row of rows) dueAt.set(row.event_id, row.due_at.getTime());
          return dueAt.size === events.length;
        },
        'three deliveries waiting for their retry',
        10_000,
        5,
      );
      await waitFor(() => target.received.length === 2 * events.length, 'both attempts of each', 10_000);
      const lateness = target.received
        .filter((delivery) => delivery.headers['x-service-delivery-attempt'] === '2')
        .map((delivery) => delivery.receivedAt - dueAt.get(String(delivery.headers['x-service-event-id']))!);
      expect(
        lateness.every((ms) => ms >= 0 && ms <= 50),
        `received ${lateness.join(', ')} ms after due`,
      ).to.equal(true);
    });
  });
});
