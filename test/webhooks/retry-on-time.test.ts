import { expect } from 'chai';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair } from '../support/integrity.ts';
import { newEvent } from '../support/newEvents.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';
import { insertEndpointRow } from '../support/webhookEndpoints.ts';

/**
 * Issue 42, item 2: a relay that polls only every 30 s still starts each retry on time, because it sleeps until
 * the next due time rather than until its next poll. The bound is a latency, so scripts/run-suite.ts runs this
 * file alone: beside other files it would measure their CPU, not the relay.
 */
describe('a retry starts on time, though the relay polls only every 30 s', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let target: TestReceiver;

  before(async () => {
    db = await createTestDatabase();
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
    await db?.drop();
  });

  it('starts a retry within 50 ms of its due time, though the relay polls only every 30 s @latency', async () => {
    const id = `wh_${'c'.repeat(32)}`;
    await insertEndpointRow(db.pool, { id, tenantId: 'idle', url: target.url });
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
