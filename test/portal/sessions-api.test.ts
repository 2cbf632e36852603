import { expect } from 'chai';
import { Writable } from 'node:stream';
import pg from 'pg';
import { createLogger } from '../../src/platform/logger.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { call, mintKey, revokeKey, startTestService, type TestService } from '../support/service.ts';

/**
 * The session API of the customer portal, as a platform's backend and the portal page use it (docs/portal.md).
 * The browser flows themselves are in portal.browser.test.ts; this file holds the rules of the API.
 */
describe('portal sessions: POST /portal/sessions, the exchange, the resume and DELETE', () => {
  let db: TestDatabase;
  let api: TestService;
  let logLines: string[];
  let backendKey: string;
  let backendLookup: string;
  let readOnlyBackendKey: string;
  const publicBaseUrl = 'https://audit.example.test/base';

  const mint = (key: string, body?: unknown) => call(`${api.baseUrl}/portal/sessions`, { key, method: 'POST', body });
  const exchange = (linkToken: unknown, headers: Record<string, string> = {}) =>
    call(`${api.baseUrl}/portal/sessions/exchange`, { method: 'POST', body: { link_token: linkToken }, headers });
  const linkTokenOf = (url: string) => new URL(url).hash.replace(/^#link=/, '');
  const resume = (cookie: string | undefined, headers: Record<string, string> = {}) =>
    call(`${api.baseUrl}/portal/sessions/resume`, { method: 'POST', headers: { ...(cookie ? { cookie } : {}), ...headers } });

  async function openSession(body?: unknown): Promise<{ id: string; accessToken: string; cookie: string; url: string }> {
    const minted = await mint(backendKey, body);
    expect(minted.status, minted.text).to.equal(201);
    const opened = await exchange(linkTokenOf(minted.json.url));
    expect(opened.status, opened.text).to.equal(200);
    const cookie = opened.headers.get('set-cookie')!.split(';')[0]!;
    return { id: minted.json.session.id, accessToken: opened.json.access_token, cookie, url: minted.json.url };
  }

  before(async () => {
    db = await createTestDatabase();
    logLines = [];
    const capture = new Writable({
      write(chunk, _encoding, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    await seedEvents(db.url, [
      newEvent({ tenantId: 'clinic-a', action: 'phi.read', resourceId: 'patient-1' }),
      newEvent({ tenantId: 'clinic-b', action: 'phi.read', resourceId: 'patient-2' }),
    ]);
    api = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      log: createLogger('debug', capture),
      env: { PUBLIC_BASE_URL: `${publicBaseUrl}/` },
    });
    ({ key: backendKey, lookupId: backendLookup } = await mintKey(db.url, {
      tenantId: 'clinic-a',
      scopes: ['audit:read', 'audit:export', 'portal:sessions'],
    }));
    readOnlyBackendKey = (await mintKey(db.url, { tenantId: 'clinic-a', scopes: ['audit:read'] })).key;
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  describe('minting', () => {
    it('answers 201 with the session and a link under PUBLIC_BASE_URL whose token is in the fragment', async () => {
      const response = await mint(backendKey, { ttl_s: 600, capabilities: ['audit:read', 'audit:export'] });
      expect(response.status).to.equal(201);
      expect(response.headers.get('cache-control')).to.equal('no-store');
      const { session, url } = response.json;
      expect(session.id).to.match(/^pss_[0-9a-f]{32}$/);
      expect(session.tenant_id).to.equal('clinic-a');
      expect(session.capabilities).to.deep.equal(['audit:export', 'audit:read']);
      const ttlMs = Date.parse(session.expires_at) - Date.parse(session.created_at);
      expect(ttlMs).to.be.within(599_000, 601_000);
      expect(url).to.match(/^https:\/\/audit\.example\.test\/base\/portal\/#link=psl_[0-9a-f]{32}_[0-9a-f]{64}$/);
    });

    it('defaults to 900 s and audit:read, and takes no body at all', async () => {
      const response = await mint(backendKey);
      expect(response.status).to.equal(201);
      expect(response.json.session.capabilities).to.deep.equal(['audit:read']);
      expect(Date.parse(response.json.session.expires_at) - Date.parse(response.json.session.created_at)).to.be.within(899_000, 901_000);
    });

    it('needs a key with portal:sessions (403 naming it)', async () => {
      const response = await mint(readOnlyBackendKey, {});
      expect(response.status).to.equal(403);
      expect(response.json).to.include({ error: 'forbidden', required_scope: 'portal:sessions' });
    });

    it("refuses a capability the key lacks with 403, and one outside the key scopes' vocabulary with 422", async () => {
      const lacking = await mint(backendKey, { capabilities: ['audit:read', 'webhooks:write'] });
      expect(lacking.status).to.equal(403);
      expect(lacking.json).to.include({ error: 'forbidden', required_scope: 'webhooks:write' });
      const beyondThePortal = await mint(backendKey, { capabilities: ['audit:read', 'portal:sessions'] });
      expect(beyondThePortal.status).to.equal(422);
      expect(beyondThePortal.json.details[0].field).to.equal('capabilities.1');
      const streams = await mint(backendKey, { capabilities: ['audit:read', 'streams:write'] });
      expect(streams.status).to.equal(403);
      expect(streams.json).to.include({ error: 'forbidden', required_scope: 'streams:write' });
    });

    for (const [body, field] of [
      [{ ttl_s: 59 }, 'ttl_s'],
      [{ ttl_s: 3601 }, 'ttl_s'],
      [{ ttl_s: '900' }, 'ttl_s'],
      [{ capabilities: ['audit:export'] }, 'capabilities'],
      [{ capabilities: [] }, 'capabilities'],
      [{ scopes: ['audit:read'] }, ''],
    ] as const) {
      it(`refuses ${JSON.stringify(body)} with 422 and stores nothing`, async () => {
        const before = await sessionCount();
        const response = await mint(backendKey, body);
        expect(response.status).to.equal(422);
        expect(response.json.error).to.equal('validation_failed');
        if (field) expect(response.json.details.map((detail: { field: string }) => detail.field)).to.include(field);
        expect(await sessionCount()).to.equal(before);
      });
    }
  });

  describe('the exchange', () => {
    it("opens the session once: the access token reads the tenant's trail; a second exchange is 410 portal_link_used", async () => {
      const minted = await mint(backendKey);
      const token = linkTokenOf(minted.json.url);
      const first = await exchange(token);
      expect(first.status).to.equal(200);
      expect(first.json.session.id).to.equal(minted.json.session.id);
      expect(first.json.access_token).to.match(/^psa_/);
      const events = await call(`${api.baseUrl}/audit/events?action=phi.read`, { key: first.json.access_token });
      expect(events.status).to.equal(200);
      expect(events.json.events.map((event: { resource_id: string }) => event.resource_id)).to.deep.equal(['patient-1']);
      const second = await exchange(token);
      expect(second.status).to.equal(410);
      expect(second.json.error).to.equal('portal_link_used');
    });

    it('sets an HttpOnly, SameSite=Strict cookie scoped to the resume path, Secure under an https base URL', async () => {
      const minted = await mint(backendKey);
      const opened = await exchange(linkTokenOf(minted.json.url));
      const cookie = opened.headers.get('set-cookie')!;
      expect(cookie).to.match(/^atr_portal_session=psb_[0-9a-f]{32}_[0-9a-f]{64};/);
      expect(cookie).to.match(/; path=\/api\/v2\/public\/portal\/sessions\/resume/i);
      expect(cookie).to.match(/; httponly/i);
      expect(cookie).to.match(/; samesite=strict/i);
      expect(cookie).to.match(/; secure/i);
    });

    it('lets exactly one of many simultaneous exchanges of one link win', async () => {
      const minted = await mint(backendKey);
      const token = linkTokenOf(minted.json.url);
      const statuses = (await Promise.all(Array.from({ length: 8 }, () => exchange(token)))).map((response) => response.status);
      expect(statuses.filter((status) => status === 200)).to.have.length(1);
      expect(statuses.filter((status) => status === 410)).to.have.length(7);
    });

    it('answers the uniform 401 to a wrong secret, an unknown session or a malformed token', async () => {
      const minted = await mint(backendKey);
      const token = linkTokenOf(minted.json.url);
      const wrongSecret = `${token.slice(0, -4)}0000`;
      const unknown = `psl_${'0'.repeat(32)}_${token.slice(-64)}`;
      for (const attempt of [wrongSecret, unknown, 'not-a-token', '']) {
        const response = await exchange(attempt);
        expect(response.status, attempt).to.equal(401);
        expect(response.text).to.equal('{"error":"unauthorized"}');
      }
      // The real link still works: failures do not consume it.
      expect((await exchange(token)).status).to.equal(200);
    });
  });

  describe('a live session', () => {
    it("has the session's capabilities as scopes: webhooks:write is refused (403) when not granted", async () => {
      const { accessToken } = await openSession();
      const response = await call(`${api.baseUrl}/audit/webhooks`, {
        key: accessToken,
        body: { url: 'https://example.com/hook', event_filter: [] },
      });
      expect(response.status).to.equal(403);
      expect(response.json).to.include({ required_scope: 'webhooks:write' });
      expect(response.json.message).to.equal('This portal session lacks the webhooks:write scope.');
    });

    it('cannot mint sessions itself', async () => {
      const { accessToken } = await openSession();
      expect((await mint(accessToken, {})).status).to.equal(403);
    });

    it("never sees another tenant's event: its id is 404 like an unknown one", async () => {
      const { accessToken } = await openSession();
      const clinicB = await mintKey(db.url, { tenantId: 'clinic-b', scopes: ['audit:read'] });
      const other = await call(`${api.baseUrl}/audit/events?action=phi.read`, { key: clinicB.key });
      const otherId = other.json.events[0].event_id;
      const response = await call(`${api.baseUrl}/audit/events/${otherId}`, { key: accessToken });
      expect(response.status).to.equal(404);
    });

    it('resumes after a reload with its cookie, and refuses a resume from another site or without the cookie', async () => {
      const { cookie, id } = await openSession();
      const resumed = await resume(cookie, { 'sec-fetch-site': 'same-origin' });
      expect(resumed.status).to.equal(200);
      expect(resumed.json.session.id).to.equal(id);
      expect((await call(`${api.baseUrl}/audit/events`, { key: resumed.json.access_token })).status).to.equal(200);
      expect((await resume(cookie, { 'sec-fetch-site': 'cross-site' })).status).to.equal(401);
      expect((await resume(undefined)).status).to.equal(401);
    });

    it('is rate limited like a key, with a budget of its own', async () => {
      const limited = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { RATE_LIMIT_READ_PER_MINUTE: '3' } });
      try {
        const minted = await call(`${limited.baseUrl}/portal/sessions`, { key: backendKey, method: 'POST' });
        expect(minted.status, minted.text).to.equal(201);
        const opened = await call(`${limited.baseUrl}/portal/sessions/exchange`, { body: { link_token: linkTokenOf(minted.json.url) } });
        const statuses: number[] = [];
        for (let index = 0; index < 4; index += 1) {
          statuses.push((await call(`${limited.baseUrl}/audit/events`, { key: opened.json.access_token })).status);
        }
        expect(statuses).to.deep.equal([200, 200, 200, 429]);
        // The backend's key has its own budget.
        expect((await call(`${limited.baseUrl}/audit/events`, { key: backendKey })).status).to.equal(200);
      } finally {
        await limited.stop();
      }
    });
  });

  describe('the end of a session', () => {
    it('DELETE ends it at once: its token, its resume and its link are refused', async () => {
      const { id, accessToken, cookie } = await openSession();
      const ended = await call(`${api.baseUrl}/portal/sessions/${id}`, { key: backendKey, method: 'DELETE' });
      expect(ended.status).to.equal(204);
      const refused = await call(`${api.baseUrl}/audit/events`, { key: accessToken });
      expect(refused.status).to.equal(401);
      expect(refused.text).to.equal('{"error":"unauthorized"}');
      const resumed = await resume(cookie);
      expect(resumed.status).to.equal(410);
      expect(resumed.json.error).to.equal('portal_session_ended');
      // Idempotent.
      expect((await call(`${api.baseUrl}/portal/sessions/${id}`, { key: backendKey, method: 'DELETE' })).status).to.equal(204);
    });

    it("a link not yet opened cannot be opened once its session ended; another tenant's session id is 404", async () => {
      const minted = await mint(backendKey);
      const otherTenant = await mintKey(db.url, { tenantId: 'clinic-b', scopes: ['audit:read', 'portal:sessions'] });
      const foreign = await call(`${api.baseUrl}/portal/sessions/${minted.json.session.id}`, { key: otherTenant.key, method: 'DELETE' });
      expect(foreign.status).to.equal(404);
      await call(`${api.baseUrl}/portal/sessions/${minted.json.session.id}`, { key: backendKey, method: 'DELETE' });
      const opened = await exchange(linkTokenOf(minted.json.url));
      expect(opened.status).to.equal(410);
      expect(opened.json.error).to.equal('portal_session_ended');
    });

    it('a session may end itself (the portal sign-out), but not another one', async () => {
      const mine = await openSession();
      const other = await openSession();
      const foreign = await call(`${api.baseUrl}/portal/sessions/${other.id}`, { key: mine.accessToken, method: 'DELETE' });
      expect(foreign.status).to.equal(403);
      const own = await call(`${api.baseUrl}/portal/sessions/${mine.id}`, { key: mine.accessToken, method: 'DELETE' });
      expect(own.status).to.equal(204);
      expect(own.headers.get('set-cookie')).to.match(/^atr_portal_session=; Path=[^;]+; Max-Age=0;/);
      expect((await call(`${api.baseUrl}/audit/events`, { key: mine.accessToken })).status).to.equal(401);
      expect((await call(`${api.baseUrl}/audit/events`, { key: other.accessToken })).status).to.equal(200);
    });

    it('an expired session is refused: its token 401, its link and its resume 410 portal_session_expired', async () => {
      const minted = await mint(backendKey);
      const opened = await openSession();
      await expireSession(minted.json.session.id);
      await expireSession(opened.id);
      expect((await exchange(linkTokenOf(minted.json.url))).json.error).to.equal('portal_session_expired');
      expect((await call(`${api.baseUrl}/audit/events`, { key: opened.accessToken })).status).to.equal(401);
      expect((await resume(opened.cookie)).json.error).to.equal('portal_session_expired');
    });

    it('revoking the key that minted a session ends the session too', async () => {
      const minter = await mintKey(db.url, { tenantId: 'clinic-a', scopes: ['audit:read', 'portal:sessions'] });
      const minted = await mint(minter.key);
      const opened = await exchange(linkTokenOf(minted.json.url));
      expect((await call(`${api.baseUrl}/audit/events`, { key: opened.json.access_token })).status).to.equal(200);
      await revokeKey(db.url, minter.lookupId);
      expect((await call(`${api.baseUrl}/audit/events`, { key: opened.json.access_token })).status).to.equal(401);
    });
  });

  describe("the tenant's trail and the logs", () => {
    it('records creation and end as admin.portal_session.* events, without a token or secret', async () => {
      const { id, url, accessToken, cookie } = await openSession({ capabilities: ['audit:read', 'audit:export'] });
      await call(`${api.baseUrl}/portal/sessions/${id}`, { key: backendKey, method: 'DELETE' });
      const trail = await call(`${api.baseUrl}/audit/events?action=admin.portal_session.create`, { key: backendKey });
      const created = trail.json.events.find((event: { resource_id: string }) => event.resource_id === id);
      expect(created).to.include({ resource_type: 'portal_session', user_id: `api_key:${backendLookup}`, user_role: 'api_key' });
      expect(JSON.parse(created.details)).to.deep.include({
        capabilities: ['audit:export', 'audit:read'],
        minted_by: `api_key:${backendLookup}`,
      });
      const endTrail = await call(`${api.baseUrl}/audit/events?action=admin.portal_session.end`, { key: backendKey });
      expect(endTrail.json.events.map((event: { resource_id: string }) => event.resource_id)).to.include(id);
      const secrets = [linkTokenOf(url), accessToken, cookie.split('=')[1]!];
      const everything = JSON.stringify(trail.json) + JSON.stringify(endTrail.json);
      for (const secret of secrets) expect(everything).not.to.include(secret.slice(-64));
    });

    it('never writes a link token, access token or browser secret to the logs', async () => {
      const { url, accessToken, cookie } = await openSession();
      await call(`${api.baseUrl}/audit/events`, { key: accessToken });
      await resume(cookie);
      const logs = logLines.join('');
      expect(logs).to.include('"route":"/api/v2/public/portal/sessions/exchange"');
      for (const secret of [linkTokenOf(url), accessToken, cookie.split('=')[1]!]) expect(logs).not.to.include(secret.slice(-64));
    });
  });

  async function sessionCount(): Promise<number> {
    return withClient(async (client) => Number((await client.query('SELECT count(*) FROM portal_sessions')).rows[0].count));
  }

  // The passing of time, in this file's own database: a session's expiry moved into the past.
  async function expireSession(id: string): Promise<void> {
    await withClient((client) =>
      client.query(`UPDATE portal_sessions SET expires_at = now(), created_at = now() - interval '1 hour' WHERE id = $1`, [id]),
    );
  }

  async function withClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end();
    }
  }
});
