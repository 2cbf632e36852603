import { expect } from 'chai';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/platform/logger.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { freePort } from '../support/ports.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

describe('webhook delivery logs', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let receiver: TestReceiver;
  let logText: string;

  const lines = (): LogLine[] =>
    logText
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as LogLine);
  const attemptLines = (eventId: string) => lines().filter((line) => line.event_id === eventId);

  before(async () => {
    db = await createTestDatabase();
    logText = '';
    const capture = new Writable({
      write(chunk, _encoding, done) {
        logText += String(chunk);
        done();
      },
    });
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'relay', 'worker'],
      // Retries 200 ms apart, so a failure, its retry and the last attempt all happen within the test.
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_SCHEDULE: '200ms', DELIVERY_RELAY_POLL_MS: '50' },
      log: createLogger('debug', capture),
    });
    receiver = await startReceiver();
  });

  after(async () => {
    await service?.stop();
    await receiver?.close();
    await db?.drop();
  });

  async function register(tenantId: string, url: string): Promise<{ endpointId: string; secret: string }> {
    const { key } = await mintKey(db.url, { tenantId, scopes: ['webhooks:write'] });
    const response = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url, event_filter: ['phi.'] } });
    expect(response.status, response.text).to.equal(201);
    return { endpointId: response.json.endpoint.id, secret: response.json.secret };
  }

  it('logs a failed attempt at warn and the success after it at debug, with ids, attempt and status', async () => {
    const { endpointId, secret } = await register('logs-a', receiver.url);
    let answered = 0;
    receiver.reply(() => (answered++ === 0 ? 503 : 204));
    const event = newEvent({ tenantId: 'logs-a', action: 'phi.read', details: '{"diagnosis":"body-marker-7f3a"}' });
    await seedEvents(db.url, [event]);
    await waitFor(() => attemptLines(event.eventId).length === 2, 'two logged attempts');

    const [failure, success] = attemptLines(event.eventId);
    expect(failure).to.include({
      level: 'warn',
      tenant_id: 'logs-a',
      endpoint_id: endpointId,
      event_id: event.eventId,
      attempt: 1,
      status_code: 503,
      error: null,
    });
    expect(failure!.msg).to.match(/retried/);
    expect(failure!.next_attempt_in_ms).to.be.a('number');
    expect(success).to.include({
      level: 'debug',
      msg: 'webhook delivered',
      endpoint_id: endpointId,
      event_id: event.eventId,
      attempt: 2,
      status_code: 204,
    });
    expect(success!.delivery_id).to.equal(failure!.delivery_id);

    const signature = String(receiver.received.at(-1)!.headers['x-service-signature']);
    expect(logText).not.to.include(secret);
    expect(logText).not.to.include('body-marker-7f3a');
    expect(logText).not.to.include(signature.split('v1=')[1]!);
  });

  it('logs a connection failure with its kind and no status, and the last failed attempt as such', async () => {
    const closedPort = await freePort();
    const { endpointId } = await register('logs-b', `http://127.0.0.1:${closedPort}/hook`);
    const event = newEvent({ tenantId: 'logs-b', action: 'phi.read' });
    await seedEvents(db.url, [event]);
    await waitFor(() => attemptLines(event.eventId).length === 2, 'both attempts logged');

    const [first, last] = attemptLines(event.eventId);
    expect(first).to.include({ level: 'warn', endpoint_id: endpointId, attempt: 1, status_code: null });
    expect(first!.error).to.match(/^ECONNREFUSED: /);
    expect(last).to.include({ level: 'warn', msg: 'webhook delivery failed on its last attempt', attempt: 2, next_attempt_in_ms: null });
  });
});
