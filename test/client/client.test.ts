import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  AuditTrailApiError,
  AuditTrailClient,
  standardWebhooksSecretOf,
  verifyStandardWebhook,
  verifyWebhookSignature,
} from '../../src/client/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { mintKey, startTestService, type TestService } from '../support/service.ts';

const T0 = Date.parse('2026-08-01T00:00:00.000Z');

describe('AuditTrailClient against the running service', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let api: TestService;
  let client: AuditTrailClient;
  // 12,345 events, enough for the export walk to pass the 10,000 cap.
  const events = Array.from({ length: 12_345 }, (_, i) =>
    newEvent({
      tenantId: 'client',
      occurredAtMs: T0 + Math.floor(i / 4),
      action: i % 5 === 0 ? 'phi.export' : 'phi.read',
      userId: `user-${i % 7}`,
      resourceId: `p-${i % 1000}`,
    }),
  );
  const window = { until: new Date('2026-09-01T00:00:00Z') };

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, events);
    api = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_ALLOW_HTTP: 'true' },
    });
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
    const refused = await client.registerWebhook({ url: 'ftp://nope' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).to.be.instanceOf(AuditTrailApiError);
    expect((refused as AuditTrailApiError).status).to.equal(422);
  });

  it('mints and ends a customer portal session', async () => {
    const { key } = await mintKey(db.url, { tenantId: 'client', scopes: ['audit:read', 'audit:export', 'portal:sessions'] });
    const backend = new AuditTrailClient({ baseUrl: api.baseUrl, apiKey: key });
    const { session, url } = await backend.createPortalSession({ ttlS: 120, capabilities: ['audit:read', 'audit:export'] });
    expect(session.id).to.match(/^pss_/);
    expect(session.capabilities).to.deep.equal(['audit:export', 'audit:read']);
    expect(url).to.match(/\/portal\/#link=psl_/);
    await backend.endPortalSession(session.id);
    const exchange = await fetch(`${api.baseUrl}/portal/sessions/exchange`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ link_token: new URL(url).hash.slice('#link='.length) }),
    });
    expect(exchange.status).to.equal(410);
    const refused = await client.createPortalSession().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((refused as AuditTrailApiError).status).to.equal(403);
  });

  it('rotates a secret with overlap and sends a test delivery that verifies with either secret', async () => {
    const received: Array<{ headers: Record<string, string>; body: Buffer }> = [];
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        received.push({ headers: request.headers as Record<string, string>, body: Buffer.concat(chunks) });
        response.writeHead(202).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const registered = await client.registerWebhook({ url });
      expect(registered.standard_webhooks_secret).to.equal(standardWebhooksSecretOf(registered.secret));
      const rotated = await client.rotateSecret(registered.endpoint.id, { overlapS: 120 });
      expect(rotated.secret)
        .to.match(/^[0-9a-f]{64}$/)
        .and.not.equal(registered.secret);
      expect(Date.parse(rotated.previous_secret_expires_at) - Date.now()).to.be.closeTo(120_000, 5_000);
      const result = await client.testWebhook(registered.endpoint.id);
      expect(result).to.include({ success: true, status_code: 202, error: null });
      const [delivery] = received;
      for (const secret of [registered.secret, rotated.secret]) {
        expect(verifyWebhookSignature(secret, delivery!.headers['x-service-signature'], delivery!.body).valid).to.equal(true);
        expect(verifyStandardWebhook(secret, delivery!.headers, delivery!.body).valid).to.equal(true);
      }
      const defaulted = await client.rotateSecret(registered.endpoint.id);
      expect(Date.parse(defaulted.previous_secret_expires_at) - Date.now()).to.be.closeTo(86_400_000, 5_000);
      await client.disableWebhook(registered.endpoint.id);
      const inactive = await client.testWebhook(registered.endpoint.id).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(inactive).to.be.instanceOf(AuditTrailApiError);
      expect(inactive).to.include({ status: 409, code: 'endpoint_inactive' });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
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

  it("lists and exports one user's and one resource's events", async () => {
    const listed = [];
    for await (const event of client.listEvents({ ...window, user_id: 'user-3', resource_id: 'p-10', limit: 1 }))
      listed.push(event.event_id);
    const expected = events.filter((event) => event.userId === 'user-3' && event.resourceId === 'p-10');
    expect(expected.length).to.be.greaterThan(1);
    expect(new Set(listed)).to.deep.equal(new Set(expected.map((event) => event.eventId)));
    const exported = [];
    for await (const event of client.exportEvents({ ...window, resource_id: 'p-999' })) exported.push(event.resource_id);
    expect(exported).to.deep.equal(Array(events.filter((event) => event.resourceId === 'p-999').length).fill('p-999'));
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
      env: {
        RATE_LIMIT_READ_PER_MINUTE: '3',
        RATE_LIMIT_WINDOW_SECONDS: '1',
        RATE_LIMIT_KEY_PREFIX: `test:${randomBytes(4).toString('hex')}`,
      },
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
