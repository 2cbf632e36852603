import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter, type NewDeliveryPublisher } from '../../src/events/eventWriter.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { PrivateNats, PrivatePostgres } from '../support/private-services.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { RoleProcesses } from '../support/roleProcesses.ts';
import { TEST_ENCRYPTION_KEY, startTestService, testLogger, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';
import { testWebhookRegistry } from '../support/webhookRegistry.ts';

/** The bound docs/operations.md states: a lost publication is delivered this long after the later of its loss and the end of a Postgres or NATS outage. */
const BOUND_MS = 20_000;
/** Long, so that the ack floor stays behind the killed worker's messages for longer than the bound. */
const ACK_WAIT_MS = 60_000;
const DELIVERY_ENV = {
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  DELIVERY_RELAY_POLL_MS: '100',
  DELIVERY_ACK_WAIT_MS: String(ACK_WAIT_MS),
  // Retries of the hung endpoint's timed-out attempts come after the test.
  DELIVERY_SCHEDULE: '1h,1h,1h,1h',
};

/**
 * What an ingest pod killed between its commit and its publish leaves: deliveries written marked published
 * (fanOut.ts) whose message never reaches JetStream. Its publisher here takes the deliveries and dies.
 */
const killedIngest: NewDeliveryPublisher = { accepting: true, publish: () => undefined };

/**
 * Issue 28, item 9: a publication lost by a killed ingest (or relay) is delivered within a stated bound,
 * whatever else fails at the same time. Beside the loss: a worker killed holding messages (which holds the
 * consumer's ack floor back for the ack wait, 60 s here: the ack-floor sweep cannot help before that), a
 * NATS restart and a Postgres restart.
 */
describe('publications lost by a killed ingest, beside other faults', function () {
  this.timeout(180_000);
  let postgres: PrivatePostgres;
  let nats: PrivateNats;
  let db: TestDatabase;
  let pool: Database;
  let relay: TestService;
  let lost: TestReceiver;
  let hung: TestReceiver;
  const roles = new RoleProcesses();

  before(async () => {
    [postgres, nats] = await Promise.all([PrivatePostgres.start(), PrivateNats.start()]);
    db = await createTestDatabase(postgres.url);
    pool = new Database({ url: db.url, poolSize: 2, applicationName: 'lost publications test', log: testLogger() });
    [lost, hung] = await Promise.all([startReceiver(204), startReceiver('hang')]);
    const registry = testWebhookRegistry(pool);
    const operator = { userId: 'test', userRole: 'operator' };
    await registry.register('lost', { url: lost.url, event_filter: ['phi.'] }, operator);
    await registry.register('hung', { url: hung.url, event_filter: ['phi.'] }, operator);
  });

  after(async () => {
    roles.killAll();
    await relay?.stop();
    await Promise.all([lost?.close(), hung?.close()]);
    await pool?.close();
    await db?.pool.end().catch(() => undefined);
    await nats?.remove();
    await postgres?.remove();
  });

  /** A worker in a process of its own, to be killed by its PID. */
  const startWorker = () =>
    roles.start(['worker'], {
      ...DELIVERY_ENV,
      SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      DATABASE_URL: db.url,
      NATS_URL: nats.url,
      NATS_NAMESPACE: 'lost',
    });

  it(`delivers them within ${BOUND_MS / 1000} s of the last fault, while the killed worker's messages hold the ack floor back`, async () => {
    relay = await startTestService({
      databaseUrl: db.url,
      roles: ['relay'],
      busNamespace: 'lost',
      env: { ...DELIVERY_ENV, NATS_URL: nats.url },
    });
    const firstWorker = await startWorker();
    // The worker holds the hung endpoint's requests (10 s each) when it is killed: their messages come back
    // only after the ack wait, and the consumer's ack floor stays behind them until then.
    await new EventWriter(pool, WEBHOOK_FAN_OUT).write(
      Array.from({ length: 10 }, () => newEvent({ tenantId: 'hung' })),
      'test',
    );
    await waitFor(() => hung.received.length >= 5, 'the worker to hold the hung endpoint requests', 30_000);
    await roles.kill(firstWorker);

    // The killed ingest: its deliveries are marked published and never published.
    const events = Array.from({ length: 50 }, () => newEvent({ tenantId: 'lost' }));
    await new EventWriter(pool, WEBHOOK_FAN_OUT, undefined, killedIngest).write(events, 'test');
    // New deliveries meanwhile, published by the relay as usual, hold nothing back.
    await new EventWriter(pool, WEBHOOK_FAN_OUT).write([newEvent({ tenantId: 'lost' })], 'test');

    await nats.stop('crash');
    await nats.start();
    await postgres.stop('crash');
    await postgres.start();
    const lastFaultAt = Date.now();
    await startWorker();

    const arrived = () => new Set(lost.received.map((delivery) => String(delivery.headers['x-service-event-id'])));
    await waitFor(
      () => events.every((event) => arrived().has(event.eventId)),
      `the lost publications delivered within ${BOUND_MS} ms of the last fault`,
      BOUND_MS,
      100,
    );
    const tookMs = Date.now() - lastFaultAt;
    // Long before the ack-floor sweep could have found them: the floor waits for the killed worker's messages.
    expect(tookMs).to.be.below(ACK_WAIT_MS / 2);
    expect(await relay.metric('audit_webhook_relay_republished_total')).to.be.at.least(events.length);
  });
});
