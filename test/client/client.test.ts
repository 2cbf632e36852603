import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { AuditTrailApiError, AuditTrailClient } from '../../src/client/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent, seedEvents } from '../support/events.ts';
import { mintKey, startTestService, type TestService } from '../support/service.ts';

const T0 = Date.parse('2026-08-01T00:00:00.000Z');

describe('AuditTrailClient against the running service', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let api: TestService;
  let client: AuditTrailClient;
  // 12,345 events, enough for the export walk to pass the 10,000 cap.
  const events = Array.from({ length: 12_345 }, (_, i) =>
    newEvent({ tenantId: 'client', occurredAtMs: T0 + Math.floor(i / 4), action: i % 5 === 0 ? 'phi.export' : 'phi.read' }),
  );
  const window = { until: new Date('2026-09-01T00:00:00Z') };

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, events);
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
    const { key } = await mintKey(db.url, { tenantId: 'client', scopes: ['audit:read', 'audit:export', 'webhooks:write'] });
    client = new AuditTrailClient({ baseUrl: api.baseUrl, apiKey: key });
  });

  it('registers, lists, disables and deletes webhooks', async () => {
    const { endpoint, secret } = await client.registerWebhook({ url: 'https://hooks.example.com/client', event_filter: ['phi.'] });
    expect(endpoint.id).to.match(/^wh_/);
    expect(secret).to.match(/^[0-9a-f]{64}$/);
    const listed = await client.listWebhooks();
    expect(listed.map((item) => item.id)).to.include(endpoint.id);
    expect(listed.find((item) => item.id === endpoint.id)).to.include({ consecutive_failures: 0, active: true });
    expect((await client.disableWebhook(endpoint.id)).active).to.equal(false);
    await client.deleteWebhook(endpoint.id);
    expect((await client.listWebhooks()).map((item) => item.id)).not.to.include(endpoint.id);
    const refused = await client.registerWebhook({ url: 'ftp://nope' }).then(() => undefined, (error: unknown) => error);
    expect(refused).to.be.instanceOf(AuditTrailApiError);
    expect((refused as AuditTrailApiError).status).to.equal(422);
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  it('iterates pages and events of a filtered window', async () => {
    const pages = [];
    for await (const page of client.listPages({ ...window, action: 'phi.export', limit: 1000 })) pages.push(page);
    const expected = events.filter((event) => event.action === 'phi.export');
    expect(pages).to.have.length(Math.ceil(expected.length / 1000));
    const ids = new Set<string>();
    for await (const event of client.listEvents({ ...window, action: 'phi.export', limit: 777 })) ids.add(event.event_id);
    expect(ids.size).to.equal(expected.length);
  });

  it('looks up one event, and reports an unknown id as a typed 404', async () => {
    const event = await client.getEvent(events[42]!.eventId);
    expect(event.event_id).to.equal(events[42]!.eventId);
    const failure = await client.getEvent('0190a0d5-0000-7000-8000-000000000000').catch((error: unknown) => error);
    expect(failure).to.be.instanceOf(AuditTrailApiError);
    expect(failure).to.include({ status: 404, code: 'not_found' });
  });

  it('exports every event, walking past the 10,000-row cap', async () => {
    const ids = new Set<string>();
    let count = 0;
    for await (const event of client.exportEvents({ ...window, since: new Date(T0) })) {
      ids.add(event.event_id);
      count += 1;
    }
    expect(count).to.equal(events.length);
    expect(ids.size).to.equal(events.length);
  });

  it('waits out 429 answers, honouring Retry-After, and then succeeds', async () => {
    const limited = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      env: { RATE_LIMIT_READ_PER_MINUTE: '3', RATE_LIMIT_WINDOW_SECONDS: '1', RATE_LIMIT_KEY_PREFIX: `test:${randomBytes(4).toString('hex')}` },
    });
    try {
      const { key } = await mintKey(db.url, { tenantId: 'client', scopes: ['audit:read'] });
      const patient = new AuditTrailClient({ baseUrl: limited.baseUrl, apiKey: key, baseDelayMs: 50 });
      const started = Date.now();
      let pages = 0;
      for await (const _page of patient.listPages({ ...window, action: 'phi.export', limit: 500 })) pages += 1;
      expect(pages).to.equal(Math.ceil(events.filter((event) => event.action === 'phi.export').length / 500));
      // 5 pages at 3 a second: at least one full Retry-After was waited.
      expect(Date.now() - started).to.be.at.least(900);

      const impatient = new AuditTrailClient({ baseUrl: limited.baseUrl, apiKey: key, maxRetries: 0 });
      const failures = await Promise.all(Array.from({ length: 5 }, () => impatient.listPage(window).catch((error: unknown) => error)));
      const refused = failures.find((failure) => failure instanceof AuditTrailApiError) as AuditTrailApiError;
      expect(refused).to.include({ status: 429, code: 'rate_limit_exceeded' });
    } finally {
      await limited.stop();
    }
  });
});
