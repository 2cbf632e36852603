import { expect } from 'chai';
import { request } from 'node:http';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const T0 = Date.parse('2026-09-01T00:00:00.000Z');

describe('POST /audit/export', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let api: TestService;
  let key: string;
  let readerKey: string;

  const small = [
    newEvent({ tenantId: 'exp', occurredAtMs: T0 + 1000, action: 'phi.read', phiInvolved: true }),
    newEvent({ tenantId: 'exp', occurredAtMs: T0 + 2000, action: 'phi.query', phiInvolved: true }),
    newEvent({
      tenantId: 'exp',
      occurredAtMs: T0 + 3000,
      action: 'auth.login',
      phiInvolved: false,
      fieldsAccessed: '',
      resourceType: 'session',
    }),
    newEvent({ tenantId: 'other', occurredAtMs: T0 + 1500, action: 'phi.read' }),
  ];
  const window = { until: '2026-09-02T00:00:00Z' };
  const exportUrl = (query = '') => `${api.baseUrl}/audit/export${query}`;
  const exportCall = (body: unknown, query = '', headers: Record<string, string> = {}) => call(exportUrl(query), { key, body, headers });

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, small);
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    key = (await mintKey(db.url, { tenantId: 'exp', scopes: ['audit:export', 'audit:read'] })).key;
    readerKey = (await mintKey(db.url, { tenantId: 'exp', scopes: ['audit:read'] })).key;
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  it('exports as one JSON object, newest first, with count and truncated', async () => {
    const response = await exportCall(window);
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    expect(response.headers.get('x-service-truncated')).to.equal('false');
    expect(response.json.count).to.equal(3);
    expect(response.json.truncated).to.equal(false);
    expect(response.json.events.map((event: { event_id: string }) => event.event_id)).to.deep.equal(
      [small[2]!, small[1]!, small[0]!].map((event) => event.eventId),
    );
  });

  it('exports NDJSON, one event per line, identical to the list representation', async () => {
    const response = await exportCall(window, '?format=ndjson');
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^application\/x-ndjson/);
    const lines = response.text.trimEnd().split('\n');
    expect(lines).to.have.length(3);
    const listed = await call(`${api.baseUrl}/audit/events?until=${window.until}`, { key });
    expect(lines.map((line) => JSON.parse(line))).to.deep.equal(listed.json.events);
  });

  it('applies the list filters', async () => {
    const phi = await exportCall({ ...window, phi_involved: true, action: 'phi.read' });
    expect(phi.json.events.map((event: { event_id: string }) => event.event_id)).to.deep.equal([small[0]!.eventId]);
    const since = await exportCall({ since: new Date(T0 + 2000).toISOString(), until: new Date(T0 + 3000).toISOString() });
    expect(since.json.count).to.equal(1);
    const empty = await exportCall({ ...window, resource_type: 'nothing' });
    expect(empty.json).to.deep.equal({ events: [], count: 0, truncated: false });
  });

  it("records every export in the caller's trail", async () => {
    await exportCall({ ...window, action: 'phi.query' }, '?format=ndjson', { 'user-agent': 'exporter/1.0' });
    await waitFor(
      async () => (await db.pool.query(`SELECT 1 FROM events WHERE tenant_id = 'exp' AND action = 'audit.export'`)).rowCount! > 0,
      'export recorded',
    );
    const { rows } = await db.pool.query(
      `SELECT user_id, user_agent, success, details FROM event_fields WHERE tenant_id = 'exp' AND action = 'audit.export' ORDER BY occurred_at DESC LIMIT 1`,
    );
    expect(rows[0].user_id).to.match(/^api_key:[0-9a-f]{8}$/);
    expect(rows[0].user_agent).to.equal('exporter/1.0');
    expect(rows[0].success).to.equal(true);
    expect(JSON.parse(rows[0].details)).to.deep.equal({
      filters: { action: 'phi.query', until: '2026-09-02T00:00:00.000Z' },
      format: 'ndjson',
      count: 1,
      truncated: false,
      completed: true,
    });
  });

  it("exports one user's or one resource's events and records those filters in the trail", async () => {
    const trail = [
      newEvent({ tenantId: 'exp-who', occurredAtMs: T0 + 1000, userId: 'dr-ames', resourceId: 'p-1' }),
      newEvent({ tenantId: 'exp-who', occurredAtMs: T0 + 2000, userId: 'dr-ames', resourceId: 'p-2' }),
      newEvent({ tenantId: 'exp-who', occurredAtMs: T0 + 3000, userId: 'nurse-bo', resourceId: 'p-1', resourceType: 'upload' }),
    ];
    await seedEvents(db.url, trail);
    const whoKey = (await mintKey(db.url, { tenantId: 'exp-who', scopes: ['audit:export'] })).key;
    const exportWho = async (body: object) => {
      const response = await call(exportUrl(), { key: whoKey, body: { ...window, ...body } });
      expect(response.status, response.text).to.equal(200);
      return response.json.events.map((event: { event_id: string }) => event.event_id);
    };
    expect(await exportWho({ user_id: 'dr-ames' })).to.deep.equal([trail[1]!.eventId, trail[0]!.eventId]);
    expect(await exportWho({ resource_id: 'p-1' })).to.deep.equal([trail[2]!.eventId, trail[0]!.eventId]);
    expect(await exportWho({ resource_id: 'p-1', resource_type: 'claim' })).to.deep.equal([trail[0]!.eventId]);
    expect(await exportWho({ user_id: 'nurse-bo', resource_id: 'p-2' })).to.deep.equal([]);
    const lastExport = `SELECT details FROM event_fields WHERE tenant_id = 'exp-who' AND action = 'audit.export' AND details LIKE '%nurse-bo%'`;
    await waitFor(async () => (await db.pool.query(lastExport)).rowCount === 1, 'the last export recorded');
    const { rows } = await db.pool.query(lastExport);
    expect(JSON.parse(rows[0].details).filters).to.deep.equal({
      until: '2026-09-02T00:00:00.000Z',
      user_id: 'nurse-bo',
      resource_id: 'p-2',
    });
  });

  describe('bad requests change nothing and say why', () => {
    const cases: Array<[string, () => Promise<{ status: number; json: any }>, number, string?, string?]> = [
      ['limit in the body', () => exportCall({ limit: 10 }), 422, 'limit'],
      ['cursor in the body', () => exportCall({ cursor: 'abc' }), 422, 'cursor'],
      ['an unknown field', () => exportCall({ tenant_id: 'other' }), 422, 'tenant_id'],
      ['phi_involved as a string', () => exportCall({ phi_involved: 'true' }), 422, 'phi_involved'],
      ['an empty user_id', () => exportCall({ user_id: '' }), 422, 'user_id'],
      ['a resource_id that is not a string', () => exportCall({ resource_id: 42 }), 422, 'resource_id'],
      ['a malformed since', () => exportCall({ since: 'last week' }), 422, 'since'],
      ['since after until', () => exportCall({ since: '2026-09-02T00:00:00Z', until: '2026-09-01T00:00:00Z' }), 422, 'since'],
      ['an unknown format', () => exportCall({}, '?format=csv'), 422, 'format'],
      ['an unknown query parameter', () => exportCall({}, '?limit=5'), 422, 'limit'],
      ['malformed JSON', () => exportCall('{"action": '), 400, undefined, 'invalid_json'],
      ['a JSON array', () => exportCall([]), 422, '(body)'],
      [
        'a text/plain body',
        () => exportCall('action=phi.read', '', { 'content-type': 'text/plain' }),
        415,
        undefined,
        'unsupported_media_type',
      ],
    ];
    for (const [what, send, status, field, code = 'validation_failed'] of cases) {
      it(`answers ${status} for ${what}`, async () => {
        const response = await send();
        expect(response.status).to.equal(status);
        expect(response.json.error).to.equal(code);
        if (field) expect(response.json.details.map((detail: { field: string }) => detail.field)).to.include(field);
      });
    }

    it('answers 403 naming audit:export for a key without it', async () => {
      const response = await call(exportUrl(), { key: readerKey, body: {} });
      expect(response.status).to.equal(403);
      expect(response.json.required_scope).to.equal('audit:export');
    });
  });

  describe('the documented walk past the 10,000 cap', () => {
    // 25,000 events; 3,000 of them share the millisecond where the first page's cap falls.
    const crowdedMs = T0 + 3_600_000;
    const walkEvents = [
      ...Array.from({ length: 8_500 }, (_, i) => newEvent({ tenantId: 'walk', occurredAtMs: crowdedMs + 1 + Math.floor(i / 2) })),
      ...Array.from({ length: 3_000 }, () => newEvent({ tenantId: 'walk', occurredAtMs: crowdedMs })),
      ...Array.from({ length: 13_500 }, (_, i) => newEvent({ tenantId: 'walk', occurredAtMs: crowdedMs - 1 - Math.floor(i / 3) })),
    ];
    let walkKey: string;

    before(async () => {
      await seedEvents(db.url, walkEvents);
      walkKey = (await mintKey(db.url, { tenantId: 'walk', scopes: ['audit:export'] })).key;
    });

    it('visits every event exactly once, each page ending on a millisecond boundary', async () => {
      const seen: string[] = [];
      const pages: Array<{ count: number; truncated: boolean }> = [];
      let until = new Date(crowdedMs + 3_600_000).toISOString();
      for (let page = 0; page < 10; page += 1) {
        const response = await call(exportUrl('?format=ndjson'), { key: walkKey, body: { until } });
        expect(response.status).to.equal(200);
        const events = response.text
          .trimEnd()
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line));
        const truncated = response.headers.get('x-service-truncated') === 'true';
        pages.push({ count: events.length, truncated });
        expect(events.length).to.be.at.most(10_000);
        seen.push(...events.map((event: { event_id: string }) => event.event_id));
        if (!truncated) break;
        until = events.at(-1).timestamp;
      }
      expect(pages[0]).to.deep.equal({ count: 8_500, truncated: true });
      expect(seen).to.have.length(walkEvents.length);
      expect(new Set(seen).size).to.equal(walkEvents.length);
      expect(new Set(seen)).to.deep.equal(new Set(walkEvents.map((event) => event.eventId)));
    });

    it('releases its database connection at once when the client goes away', async () => {
      const url = new URL(exportUrl('?format=ndjson'));
      await new Promise<void>((resolve, reject) => {
        const req = request(
          url,
          { method: 'POST', headers: { authorization: `Bearer ${walkKey}`, 'content-type': 'application/json' } },
          (res) => {
            res.once('data', () => {
              // Read one chunk, then hang up mid-export.
              req.destroy();
              resolve();
            });
          },
        );
        req.on('error', () => undefined);
        req.once('error', reject);
        req.end(JSON.stringify({}));
      });
      await waitFor(
        async () => {
          const { rows } = await db.pool.query(
            `SELECT count(*)::int AS open FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND (state LIKE 'idle in transaction%' OR (state = 'active' AND query LIKE '%row_to_json%'))`,
          );
          return rows[0].open === 0;
        },
        'the export transaction to end',
        2_000,
      );
      // The abandoned export is on record as incomplete.
      await waitFor(async () => {
        const { rows } = await db.pool.query(
          `SELECT details FROM event_fields WHERE tenant_id = 'walk' AND action = 'audit.export' AND NOT success`,
        );
        return rows.length === 1 && JSON.parse(rows[0].details).completed === false;
      }, 'an incomplete audit.export event');
    });

    it('cuts the connection, never sending a well-formed body, when the database fails mid-stream', async () => {
      // Rows large enough that the export cannot fit in socket and stream buffers: the cursor is still
      // open, with rows left to fetch, when its backend is killed.
      const bulky = 'x'.repeat(8_000);
      await seedEvents(
        db.url,
        Array.from({ length: 3_000 }, (_, i) => newEvent({ tenantId: 'bulky', occurredAtMs: T0 + i, details: JSON.stringify({ bulky }) })),
      );
      const bulkyKey = (await mintKey(db.url, { tenantId: 'bulky', scopes: ['audit:export'] })).key;
      const url = new URL(exportUrl());
      const outcome = await new Promise<{ body: string; error?: Error }>((resolve) => {
        const req = request(
          url,
          { method: 'POST', headers: { authorization: `Bearer ${bulkyKey}`, 'content-type': 'application/json' } },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.once('data', async (first: string) => {
              body += first;
              res.pause();
              // Kill the backend serving the export while the client holds back (its last statement declared
              // or fetched from the export's cursor).
              const { rowCount } = await db.pool.query(
                `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%export_rows%'`,
              );
              expect(rowCount).to.equal(1);
              res.on('data', (chunk: string) => (body += chunk));
              res.resume();
            });
            res.on('end', () => resolve({ body }));
            res.on('error', (error) => resolve({ body, error }));
            res.on('close', () => resolve({ body, error: res.complete ? undefined : new Error('closed before the end') }));
          },
        );
        req.on('error', (error) => resolve({ body: '', error }));
        req.end(JSON.stringify({}));
      });
      expect(outcome.error, 'the response should have been cut').to.be.an('error');
      expect(() => JSON.parse(outcome.body)).to.throw();
    });
  });
});
