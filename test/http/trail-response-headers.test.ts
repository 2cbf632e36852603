import { expect } from 'chai';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

/**
 * A trail answer must not outlive the request in a cache, nor be read as anything but the type it declares
 * (docs/api.md "Response headers"): every public answer, success or error, carries both headers.
 */
describe('trail responses: Cache-Control: no-store and X-Content-Type-Options: nosniff', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let api: TestService;
  let key: string;
  const event = newEvent({ tenantId: 'acme', action: 'phi.read' });

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, [event]);
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { PUBLIC_BASE_URL: 'https://audit.example.test' } });
    ({ key } = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read', 'audit:export', 'webhooks:write', 'portal:sessions'] }));
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  function expectTrailHeaders(what: string, headers: Headers): void {
    expect(headers.get('cache-control'), what).to.equal('no-store');
    expect(headers.get('x-content-type-options'), what).to.equal('nosniff');
  }

  it('on the list, a lookup, the count, both exports, a proof and the tree head', async () => {
    const requests: Array<[string, string, unknown?]> = [
      ['list', '/audit/events'],
      ['lookup', `/audit/events/${event.eventId}`],
      ['unknown lookup', '/audit/events/00000000-0000-4000-8000-000000000000'],
      ['count', '/audit/events/count'],
      ['actions', '/audit/actions'],
      ['export', '/audit/export', {}],
      ['ndjson export', '/audit/export?format=ndjson', {}],
      ['proof', `/audit/events/${event.eventId}/proof`],
      ['tree head', '/audit/integrity/tree-head'],
      ['webhooks', '/audit/webhooks'],
    ];
    for (const [what, path, body] of requests) {
      const response = await call(`${api.baseUrl}${path}`, { key, body });
      expect(response.status, `${what}: ${response.text}`).to.be.lessThan(500);
      expectTrailHeaders(what, response.headers);
    }
  });

  it('on errors: 401, 422 and an unknown route', async () => {
    expectTrailHeaders('401', (await call(`${api.baseUrl}/audit/events`, { key: 'atr_live_nope' })).headers);
    expectTrailHeaders('422', (await call(`${api.baseUrl}/audit/events?bogus=1`, { key })).headers);
    expectTrailHeaders('404', (await call(`${api.baseUrl}/audit/nowhere`, { key })).headers);
  });

  it('on the live feed, before its first event', async () => {
    const aborted = new AbortController();
    const response = await fetch(`${api.baseUrl}/audit/events/live`, {
      headers: { authorization: `Bearer ${key}` },
      signal: aborted.signal,
    });
    expect(response.status).to.equal(200);
    expectTrailHeaders('live', response.headers);
    aborted.abort();
  });

  it("on the portal's API: the link exchange and the trail read with its access token", async () => {
    const minted = await call(`${api.baseUrl}/portal/sessions`, { key, method: 'POST', body: {} });
    expect(minted.status, minted.text).to.equal(201);
    const linkToken = new URL(minted.json.url).hash.replace(/^#link=/, '');
    const opened = await call(`${api.baseUrl}/portal/sessions/exchange`, { method: 'POST', body: { link_token: linkToken } });
    expect(opened.status, opened.text).to.equal(200);
    expectTrailHeaders('exchange', opened.headers);
    const page = await call(`${api.baseUrl}/audit/events`, { key: opened.json.access_token });
    expect(page.status, page.text).to.equal(200);
    expectTrailHeaders('portal list', page.headers);
  });
});
