import { expect } from 'chai';
import { request } from 'node:http';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

/**
 * Input Postgres would refuse (U+0000), text the columns and the stored document would disagree on
 * (unpaired surrogates), instants outside years 0001-9999, and methods nobody routes: each is the
 * documented JSON error, and nothing changes.
 */
describe('hostile input to the public API', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let api: TestService;
  let key: string;

  const count = async (sql: string) => Number((await db.pool.query(sql)).rows[0].count);
  const expect422 = (response: { status: number; json: any; text: string }, field: string) => {
    expect(response.status, response.text).to.equal(422);
    expect(response.json.error).to.equal('validation_failed');
    expect(response.json.details.map((detail: { field: string }) => detail.field)).to.include(field);
  };

  before(async () => {
    db = await createTestDatabase();
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
    ({ key } = await mintKey(db.url, { tenantId: 'hostile', scopes: ['audit:read', 'audit:export', 'webhooks:write'] }));
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  describe('list filters', () => {
    for (const [name, value] of [
      ['resource_type', '%00'],
      ['resource_type', 'claim%00x'],
      ['action', 'phi.read%00'],
      ['since', '2026-01-01T00:00:00Z%00'],
    ] as const) {
      it(`refuses a NUL in ${name}=${value} with 422`, async () => {
        expect422(await call(`${api.baseUrl}/audit/events?${name}=${value}`, { key }), name);
      });
    }

    for (const instant of ['0000-01-01T00:00:00Z', '9999-12-31T23:59:59-14:00', '0001-01-01T00:30:00+01:00', '10000-01-01T00:00:00Z']) {
      it(`refuses since and until outside years 0001-9999: ${instant}`, async () => {
        expect422(await call(`${api.baseUrl}/audit/events?since=${encodeURIComponent(instant)}`, { key }), 'since');
        expect422(await call(`${api.baseUrl}/audit/events?until=${encodeURIComponent(instant)}`, { key }), 'until');
      });
    }

    it('accepts the extremes of the range', async () => {
      const response = await call(`${api.baseUrl}/audit/events?since=0001-01-01T00:00:00Z&until=9999-12-31T23:59:59.999Z`, { key });
      expect(response.status, response.text).to.equal(200);
    });
  });

  describe('export bodies', () => {
    const exportWith = (body: string) =>
      call(`${api.baseUrl}/audit/export`, { key, method: 'POST', body, headers: { 'content-type': 'application/json' } });

    it('refuses a NUL in a filter and records no export', async () => {
      const before = await count(`SELECT count(*) FROM events WHERE action = 'audit.export'`);
      expect422(await exportWith('{"resource_type":"claim\\u0000"}'), 'resource_type');
      expect(await count(`SELECT count(*) FROM events WHERE action = 'audit.export'`)).to.equal(before);
    });

    it('refuses an unpaired surrogate', async () => {
      expect422(await exportWith('{"resource_type":"claim\\ud800"}'), 'resource_type');
    });

    it('refuses a body of null rather than exporting everything', async () => {
      const response = await exportWith('null');
      expect(response.status, response.text).to.equal(422);
      expect(response.json.error).to.equal('validation_failed');
    });

    it('refuses an until outside the range', async () => {
      expect422(await exportWith('{"until":"9999-12-31T23:59:59-14:00"}'), 'until');
    });
  });

  describe('webhook registrations', () => {
    const register = (body: string) =>
      call(`${api.baseUrl}/audit/webhooks`, { key, method: 'POST', body, headers: { 'content-type': 'application/json' } });

    for (const [field, body] of [
      ['url', '{"url":"https://hooks.example.com/a\\u0000b"}'],
      ['description', '{"url":"https://hooks.example.com/a","description":"x\\u0000"}'],
      ['description', '{"url":"https://hooks.example.com/a","description":"\\udc00 alone"}'],
      ['event_filter.0', '{"url":"https://hooks.example.com/a","event_filter":["phi.\\u0000"]}'],
    ] as const) {
      it(`refuses ${body} with 422 on ${field} and stores nothing`, async () => {
        expect422(await register(body), field);
        expect(await count('SELECT count(*) FROM webhook_endpoints')).to.equal(0);
        expect(await count(`SELECT count(*) FROM events WHERE action LIKE 'admin.webhook.%'`)).to.equal(0);
      });
    }

    it('refuses a key holding NUL in the body', async () => {
      const response = await register('{"url":"https://hooks.example.com/a","x\\u0000":1}');
      expect(response.status, response.text).to.equal(422);
    });
  });

  describe('methods nobody routes', () => {
    /** node:http, because fetch refuses to send TRACE and other methods. */
    const send = (method: string, path: string) =>
      new Promise<{ status: number; type: string; allow: string | undefined; body: string }>((resolve, reject) => {
        const url = new URL(`${api.baseUrl}${path}`);
        const outgoing = request(url, { method, headers: { authorization: `Bearer ${key}` } }, (response) => {
          let body = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (body += chunk));
          response.on('end', () =>
            resolve({ status: response.statusCode!, type: String(response.headers['content-type']), allow: response.headers.allow, body }),
          );
        });
        outgoing.on('error', reject);
        outgoing.end();
      });

    for (const [method, path] of [
      ['PUT', '/audit/events'],
      ['PATCH', '/audit/webhooks'],
      ['DELETE', '/audit/events'],
    ] as const) {
      it(`answers ${method} ${path} with a JSON 405 and an Allow header`, async () => {
        const response = await send(method, path);
        expect(response.status).to.equal(405);
        expect(response.type).to.match(/^application\/json/);
        expect(JSON.parse(response.body).error).to.equal('method_not_allowed');
        expect(response.allow).to.include('GET');
      });
    }

    for (const method of ['TRACE', 'PROPFIND']) {
      it(`answers ${method}, which no route implements, with a JSON 501`, async () => {
        const response = await send(method, '/audit/events');
        expect(response.status).to.equal(501);
        expect(response.type).to.match(/^application\/json/);
        expect(JSON.parse(response.body).error).to.equal('not_implemented');
      });
    }
  });
});
