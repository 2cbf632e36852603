import { expect } from 'chai';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

describe('webhook registry API', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let api: TestService;
  let writer: string;
  let reader: string;
  let otherTenant: string;

  const hooks = () => `${api.baseUrl}/audit/webhooks`;
  const register = (body: unknown, key = writer) => call(hooks(), { key, body });

  before(async () => {
    db = await createTestDatabase();
    // Private targets allowed: the SSRF guard has its own file (target-guard.test.ts) with the production setting.
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
    ({ key: writer } = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read', 'webhooks:write'] }));
    ({ key: reader } = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'] }));
    ({ key: otherTenant } = await mintKey(db.url, { tenantId: 'globex', scopes: ['audit:read', 'webhooks:write'] }));
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  it('registers an endpoint: 201, Location, the endpoint object and a 64-hex secret shown once', async () => {
    const response = await register({
      url: 'https://hooks.example.com/audit',
      event_filter: ['phi.', 'admin.', 'phi.'],
      description: 'SIEM',
    });
    expect(response.status, response.text).to.equal(201);
    const { endpoint, secret } = response.json;
    expect(endpoint.id).to.match(/^wh_[0-9a-f]{32}$/);
    expect(response.headers.get('location')).to.equal(`/api/v2/public/audit/webhooks/${endpoint.id}`);
    expect(endpoint).to.include({ url: 'https://hooks.example.com/audit', description: 'SIEM', active: true });
    expect(endpoint.event_filter).to.deep.equal(['phi.', 'admin.']);
    expect(Date.parse(endpoint.created_at)).to.be.closeTo(Date.now(), 60_000);
    expect(secret).to.match(/^[0-9a-f]{64}$/);
    expect(endpoint).not.to.have.property('secret');

    const stored = await db.pool.query('SELECT secret_ciphertext FROM webhook_endpoints WHERE id = $1', [endpoint.id]);
    expect(stored.rows[0].secret_ciphertext.toString('hex')).not.to.include(secret);

    const listed = await call(hooks(), { key: reader });
    expect(listed.status).to.equal(200);
    const mine = listed.json.endpoints.find((item: { id: string }) => item.id === endpoint.id);
    expect(mine).to.include({ consecutive_failures: 0, last_delivery_at: null, active: true });
    expect(listed.text).not.to.include(secret);
  });

  it('defaults event_filter to every event and description to empty', async () => {
    const response = await register({ url: 'https://hooks.example.com/all' });
    expect(response.status).to.equal(201);
    expect(response.json.endpoint).to.deep.include({ event_filter: [], description: '' });
  });

  it('writes admin.webhook.create, disable and delete events to the tenant trail, never the secret', async () => {
    const { json } = await register({ url: 'https://hooks.example.com/trail' });
    const id = json.endpoint.id;
    expect((await call(`${hooks()}/${id}/disable`, { key: writer, method: 'POST' })).status).to.equal(200);
    expect((await call(`${hooks()}/${id}`, { key: writer, method: 'DELETE' })).status).to.equal(204);
    const events = await call(`${api.baseUrl}/audit/events?resource_type=webhook_endpoint&limit=1000`, { key: reader });
    const actions = events.json.events
      .filter((event: { resource_id: string }) => event.resource_id === id)
      .map((event: { action: string }) => event.action);
    expect(actions).to.deep.equal(['admin.webhook.delete', 'admin.webhook.disable', 'admin.webhook.create']);
    expect(events.text).not.to.include(json.secret);
  });

  it('disables idempotently with 200 and the endpoint, and keeps it listed as inactive', async () => {
    const { json } = await register({ url: 'https://hooks.example.com/off' });
    const first = await call(`${hooks()}/${json.endpoint.id}/disable`, { key: writer, method: 'POST' });
    expect(first.status).to.equal(200);
    expect(first.json.endpoint).to.include({ id: json.endpoint.id, active: false });
    const again = await call(`${hooks()}/${json.endpoint.id}/disable`, { key: writer, method: 'POST' });
    expect(again.status).to.equal(200);
    expect(again.json.endpoint.active).to.equal(false);
    const listed = await call(hooks(), { key: reader });
    expect(listed.json.endpoints.find((item: { id: string }) => item.id === json.endpoint.id).active).to.equal(false);
  });

  it('deletes with 204, after which the id is unknown (404)', async () => {
    const { json } = await register({ url: 'https://hooks.example.com/gone' });
    expect((await call(`${hooks()}/${json.endpoint.id}`, { key: writer, method: 'DELETE' })).status).to.equal(204);
    expect((await call(`${hooks()}/${json.endpoint.id}`, { key: writer, method: 'DELETE' })).status).to.equal(404);
    expect((await call(`${hooks()}/${json.endpoint.id}/disable`, { key: writer, method: 'POST' })).status).to.equal(404);
    const listed = await call(hooks(), { key: reader });
    expect(listed.json.endpoints.map((item: { id: string }) => item.id)).not.to.include(json.endpoint.id);
  });

  describe('scopes and tenants', () => {
    it('needs webhooks:write to register, disable or delete, and audit:read to list', async () => {
      const { json } = await register({ url: 'https://hooks.example.com/scoped' });
      for (const attempt of [
        register({ url: 'https://hooks.example.com/x' }, reader),
        call(`${hooks()}/${json.endpoint.id}/disable`, { key: reader, method: 'POST' }),
        call(`${hooks()}/${json.endpoint.id}`, { key: reader, method: 'DELETE' }),
      ]) {
        const response = await attempt;
        expect(response.status).to.equal(403);
        expect(response.json).to.include({ error: 'forbidden', required_scope: 'webhooks:write' });
      }
      const { key: exportOnly } = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:export'] });
      const listed = await call(hooks(), { key: exportOnly });
      expect(listed.status).to.equal(403);
      expect(listed.json.required_scope).to.equal('audit:read');
    });

    it("answers 403 for another tenant's endpoint on disable and delete, and changes nothing", async () => {
      const { json } = await register({ url: 'https://hooks.example.com/acme-only' });
      const disable = await call(`${hooks()}/${json.endpoint.id}/disable`, { key: otherTenant, method: 'POST' });
      expect(disable.status).to.equal(403);
      expect(disable.json.error).to.equal('forbidden');
      expect((await call(`${hooks()}/${json.endpoint.id}`, { key: otherTenant, method: 'DELETE' })).status).to.equal(403);
      const row = await db.pool.query('SELECT active FROM webhook_endpoints WHERE id = $1', [json.endpoint.id]);
      expect(row.rows[0].active).to.equal(true);
    });

    it("never lists another tenant's endpoints", async () => {
      await register({ url: 'https://hooks.example.com/globex' }, otherTenant);
      const acme = await call(hooks(), { key: reader });
      expect(acme.json.endpoints.map((item: { url: string }) => item.url)).not.to.include('https://hooks.example.com/globex');
      const globex = await call(hooks(), { key: otherTenant });
      expect(globex.json.endpoints.map((item: { url: string }) => item.url)).to.deep.equal(['https://hooks.example.com/globex']);
    });

    it('answers 404 for malformed and unknown ids', async () => {
      expect((await call(`${hooks()}/not-an-id/disable`, { key: writer, method: 'POST' })).status).to.equal(404);
      expect((await call(`${hooks()}/wh_${'0'.repeat(32)}`, { key: writer, method: 'DELETE' })).status).to.equal(404);
    });

    it('refuses REST disable and delete of an endpoint a WebhookEndpoint resource owns (409)', async () => {
      const { json } = await register({ url: 'https://hooks.example.com/gitops' });
      await db.pool.query(`UPDATE webhook_endpoints SET managed_by = 'kubernetes:team-a/siem/uid-1' WHERE id = $1`, [json.endpoint.id]);
      const disable = await call(`${hooks()}/${json.endpoint.id}/disable`, { key: writer, method: 'POST' });
      expect(disable.status).to.equal(409);
      expect(disable.json.error).to.equal('managed_by_kubernetes');
      expect((await call(`${hooks()}/${json.endpoint.id}`, { key: writer, method: 'DELETE' })).status).to.equal(409);
    });
  });

  describe('validation (422 with details; nothing stored)', () => {
    const cases: Array<[string, unknown, string]> = [
      ['a missing url', { event_filter: [] }, 'url'],
      ['a relative url', { url: '/hook' }, 'url'],
      ['plain http', { url: 'http://hooks.example.com/x' }, 'url'],
      ['credentials in the url', { url: 'https://user:pass@hooks.example.com/x' }, 'url'],
      ['a url over 2,048 characters', { url: `https://hooks.example.com/${'a'.repeat(2048)}` }, 'url'],
      ['a filter entry that is not a slug', { url: 'https://hooks.example.com/x', event_filter: ['PHI.*'] }, 'event_filter.0'],
      ['a filter that is not an array', { url: 'https://hooks.example.com/x', event_filter: 'phi.' }, 'event_filter'],
      [
        'more than 50 filter entries',
        { url: 'https://hooks.example.com/x', event_filter: Array.from({ length: 51 }, (_, i) => `a${i}.`) },
        'event_filter',
      ],
      ['a description over 500 characters', { url: 'https://hooks.example.com/x', description: 'd'.repeat(501) }, 'description'],
      ['an unknown field', { url: 'https://hooks.example.com/x', event_filters: ['phi.'] }, 'event_filters'],
    ];
    for (const [what, body, field] of cases) {
      it(`refuses ${what}`, async () => {
        const before = await db.pool.query('SELECT count(*)::int AS n FROM webhook_endpoints');
        const response = await register(body);
        expect(response.status, response.text).to.equal(422);
        expect(response.json.error).to.equal('validation_failed');
        expect(response.json.details.map((detail: { field: string }) => detail.field)).to.include(field);
        const after = await db.pool.query('SELECT count(*)::int AS n FROM webhook_endpoints');
        expect(after.rows[0].n).to.equal(before.rows[0].n);
      });
    }

    it('answers 400 for malformed JSON and 415 for another content type', async () => {
      expect((await call(hooks(), { key: writer, body: '{"url":', headers: { 'content-type': 'application/json' } })).status).to.equal(400);
      expect(
        (await call(hooks(), { key: writer, body: 'url=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status,
      ).to.equal(415);
    });

    it('refuses the 101st endpoint of a tenant', async () => {
      const { key } = await mintKey(db.url, { tenantId: 'many', scopes: ['webhooks:write'] });
      for (let index = 0; index < 100; index += 1) {
        const response = await register({ url: `https://hooks.example.com/${index}` }, key);
        expect(response.status, response.text).to.equal(201);
      }
      const refused = await register({ url: 'https://hooks.example.com/101' }, key);
      expect(refused.status).to.equal(422);
      expect(refused.json.message).to.match(/100 endpoints/);
    });
  });
});
