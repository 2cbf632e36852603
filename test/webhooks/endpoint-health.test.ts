import { expect } from 'chai';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * GET /audit/webhooks/{id}/health (docs/webhooks.md "Endpoint health"): the attempts as they were. A receiver
 * answering 401 fails every attempt while its deliveries wait for their retries, and consecutive_failures
 * (deliveries out of attempts) still says 0: the health says it is failing.
 */
describe('webhook endpoint health', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let receiver: TestReceiver;
  let key: string;

  before(async () => {
    db = await createTestDatabase();
    // One retry an hour later: a refused delivery stays pending, retrying, for the whole test.
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'relay', 'worker'],
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_SCHEDULE: '1h', DELIVERY_RELAY_POLL_MS: '50' },
    });
    receiver = await startReceiver();
    key = (await mintKey(db.url, { tenantId: 'health-a', scopes: ['audit:read', 'webhooks:write'] })).key;
  });

  after(async () => {
    await service?.stop();
    await receiver?.close();
    await db?.drop();
  });

  const health = async (endpointId: string, as = key) => call(`${service.baseUrl}/audit/webhooks/${endpointId}/health`, { key: as });

  it('counts a 401 as a failure, with its streak and last error, while the endpoint still shows no failed delivery', async () => {
    const created = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url: receiver.url, event_filter: ['phi.'] } });
    const endpointId = created.json.endpoint.id as string;
    const fresh = await health(endpointId);
    expect(fresh.status, fresh.text).to.equal(200);
    expect(fresh.json.health).to.include({
      attempts: 0,
      succeeded: 0,
      success_rate: null,
      failing_streak: 0,
      retrying: 0,
      last_failure: null,
    });

    receiver.reply(204);
    await seedEvents(db.url, [newEvent({ tenantId: 'health-a', action: 'phi.read' })]);
    await waitFor(() => receiver.received.length === 1, 'the accepted delivery');
    receiver.reply({ status: 401, body: 'bad signature' });
    await seedEvents(db.url, [
      newEvent({ tenantId: 'health-a', action: 'phi.read' }),
      newEvent({ tenantId: 'health-a', action: 'phi.export' }),
    ]);
    await waitFor(async () => (await health(endpointId)).json.health.attempts === 3, 'three recorded attempts');

    const { json } = await health(endpointId);
    expect(json.health).to.include({ attempts: 3, succeeded: 1, failing_streak: 2, retrying: 2 });
    expect(json.health.success_rate).to.be.closeTo(1 / 3, 1e-9);
    expect(json.health.last_failure).to.include({ status_code: 401, error: null });
    expect(Date.parse(json.health.last_failure.at)).to.be.greaterThan(Date.parse(json.health.last_success_at));
    const listed = await call(`${service.baseUrl}/audit/webhooks`, { key });
    const endpoint = listed.json.endpoints.find((candidate: { id: string }) => candidate.id === endpointId);
    expect(endpoint).to.include({ active: true, consecutive_failures: 0 });
  });

  it("answers another tenant's endpoint 403 and an unknown or malformed one 404, as the delivery log does", async () => {
    const created = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url: receiver.url } });
    const other = (await mintKey(db.url, { tenantId: 'health-b', scopes: ['audit:read'] })).key;
    expect((await health(created.json.endpoint.id, other)).status).to.equal(403);
    expect((await health(`wh_${'0'.repeat(32)}`)).status).to.equal(404);
    expect((await health('wh_nope')).status).to.equal(404);
  });
});
