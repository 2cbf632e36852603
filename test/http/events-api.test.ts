import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

const T0 = Date.parse('2026-10-01T00:00:00.000Z');
const HOUR = 3_600_000;
// Minting a key records admin.key.create in the tenant's trail "now"; seeded events all precede this.
const SEEDED_WINDOW = '&until=2026-11-01T00:00:00Z';

describe('GET /audit/events and /audit/events/{id}', () => {
  let db: TestDatabase;
  let api: TestService;
  let keyA: string;
  let keyB: string;
  let walkerKey: string;
  const tenantAEvents = [
    newEvent({ occurredAtMs: T0 + 1 * HOUR, action: 'phi.read', resourceType: 'claim', phiInvolved: true }),
    newEvent({ occurredAtMs: T0 + 2 * HOUR, action: 'phi.query', resourceType: 'claim', phiInvolved: true }),
    newEvent({ occurredAtMs: T0 + 3 * HOUR, action: 'admin.login', resourceType: 'session', phiInvolved: false, fieldsAccessed: '' }),
    newEvent({ occurredAtMs: T0 + 4 * HOUR, action: 'phi.read', resourceType: 'upload', phiInvolved: true }),
    newEvent({ occurredAtMs: T0 + 5 * HOUR, action: 'phi.read', resourceType: 'claim', phiInvolved: true, success: false }),
    // A different month, so that reads span partitions.
    newEvent({ occurredAtMs: T0 - 40 * 24 * HOUR, action: 'phi.export', resourceType: 'claim', phiInvolved: true }),
  ];
  const tenantBEvent = newEvent({ tenantId: 'tenant-b', occurredAtMs: T0 + 2 * HOUR, action: 'phi.read' });

  const list = (key: string, query = '') => call(`${api.baseUrl}/audit/events${query}`, { key });
  const idsOf = (body: { events: Array<{ event_id: string }> }) => body.events.map((event) => event.event_id);
  const byTimeDesc = (events: typeof tenantAEvents) =>
    [...events].sort((a, b) => b.occurredAtMs - a.occurredAtMs || (a.eventId < b.eventId ? 1 : -1)).map((event) => event.eventId);

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, [...tenantAEvents, tenantBEvent]);
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    keyA = (await mintKey(db.url, { tenantId: 'tenant-a', scopes: ['audit:read'] })).key;
    keyB = (await mintKey(db.url, { tenantId: 'tenant-b', scopes: ['audit:read'] })).key;
    walkerKey = (await mintKey(db.url, { tenantId: 'walker', scopes: ['audit:read'] })).key;
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  describe('listing', () => {
    it("returns the tenant's events newest first with a page descriptor", async () => {
      const response = await list(keyA, '?resource_type=claim');
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-type')).to.match(/^application\/json/);
      const claims = tenantAEvents.filter((event) => event.resourceType === 'claim');
      expect(idsOf(response.json)).to.deep.equal(byTimeDesc(claims));
      expect(response.json.page).to.deep.equal({ limit: 100, returned: claims.length, next_cursor: null, has_more: false });
    });

    it('renders every documented field with its type', async () => {
      const response = await list(keyA, '?action=admin.login');
      const [event] = response.json.events;
      const source = tenantAEvents[2]!;
      expect(event).to.deep.equal({
        event_id: source.eventId,
        timestamp: new Date(source.occurredAtMs).toISOString(),
        action: 'admin.login',
        user_id: source.userId,
        user_role: source.userRole,
        resource_type: 'session',
        resource_id: source.resourceId,
        fields_accessed: '',
        phi_involved: false,
        tenant_id: 'tenant-a',
        source_ip: source.sourceIp,
        user_agent: source.userAgent,
        justification: '',
        success: true,
        details: '{}',
      });
    });

    it('filters by exact action', async () => {
      const response = await list(keyA, '?action=phi.read');
      expect(idsOf(response.json)).to.deep.equal(byTimeDesc(tenantAEvents.filter((event) => event.action === 'phi.read')));
    });

    it('filters by phi_involved true and false', async () => {
      const phi = await list(keyA, '?phi_involved=true');
      const nonPhi = await list(keyA, `?phi_involved=false${SEEDED_WINDOW}`);
      expect(idsOf(phi.json)).to.deep.equal(byTimeDesc(tenantAEvents.filter((event) => event.phiInvolved)));
      expect(idsOf(nonPhi.json)).to.deep.equal(byTimeDesc(tenantAEvents.filter((event) => !event.phiInvolved)));
    });

    it('treats since as inclusive and until as exclusive', async () => {
      const since = new Date(T0 + 2 * HOUR).toISOString();
      const until = new Date(T0 + 4 * HOUR).toISOString();
      const response = await list(keyA, `?since=${since}&until=${until}`);
      const expected = tenantAEvents.filter((event) => event.occurredAtMs >= T0 + 2 * HOUR && event.occurredAtMs < T0 + 4 * HOUR);
      expect(idsOf(response.json)).to.deep.equal(byTimeDesc(expected));
      expect(expected).to.have.length(2);
    });

    it('accepts timestamps with a numeric offset', async () => {
      // 03:00+02:00 is 01:00Z: the first event of tenant A's October sits exactly on the bound.
      const response = await list(keyA, `?since=${encodeURIComponent('2026-10-01T03:00:00+02:00')}&until=2026-10-01T01:00:00.001Z`);
      expect(idsOf(response.json)).to.deep.equal([tenantAEvents[0]!.eventId]);
    });

    it('combines every filter', async () => {
      const response = await list(
        keyA,
        `?action=phi.read&resource_type=claim&phi_involved=true&since=${new Date(T0).toISOString()}&until=${new Date(T0 + 5 * HOUR).toISOString()}`,
      );
      expect(idsOf(response.json)).to.deep.equal([tenantAEvents[0]!.eventId]);
    });

    it('reads across monthly partitions', async () => {
      const response = await list(keyA, '?action=phi.export');
      expect(idsOf(response.json)).to.deep.equal([tenantAEvents[5]!.eventId]);
    });

    it("never returns another tenant's events, whatever the filters", async () => {
      const all = await list(keyB);
      expect(idsOf(all.json)).to.include(tenantBEvent.eventId);
      expect(all.json.events.every((event: { tenant_id: string }) => event.tenant_id === 'tenant-b')).to.equal(true);
      const filtered = await list(keyA, '?action=phi.read');
      expect(idsOf(filtered.json)).not.to.include(tenantBEvent.eventId);
    });
  });

  describe('pagination', () => {
    const walkerEvents = (() => {
      const events = [];
      const crowded = T0 + 10 * HOUR;
      // 1,000 events in one millisecond: only the event_id tiebreak keeps them apart.
      for (let i = 0; i < 1000; i += 1)
        events.push(newEvent({ tenantId: 'walker', occurredAtMs: crowded, action: i % 2 ? 'phi.read' : 'phi.query' }));
      for (let i = 0; i < 4000; i += 1) {
        events.push(
          newEvent({ tenantId: 'walker', occurredAtMs: T0 + Math.floor(i / 3) * 1000, action: i % 2 ? 'phi.read' : 'phi.query' }),
        );
      }
      return events;
    })();

    before(async () => {
      await seedEvents(db.url, walkerEvents);
    });

    async function walk(limit: number, filter = ''): Promise<string[]> {
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages < 10_000; pages += 1) {
        const query: string = `?limit=${limit}${filter}${SEEDED_WINDOW}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
        const response = await list(walkerKey, query);
        expect(response.status, response.text).to.equal(200);
        const page = response.json.page;
        expect(page.returned).to.equal(response.json.events.length);
        expect(page.limit).to.equal(limit);
        seen.push(...idsOf(response.json));
        if (!page.has_more) {
          expect(page.next_cursor).to.equal(null);
          return seen;
        }
        expect(page.returned).to.equal(limit);
        cursor = page.next_cursor;
      }
      throw new Error('walk did not end');
    }

    for (const limit of [1000, 333, 7]) {
      it(`walks 5,000 events (1,000 in one millisecond) with pages of ${limit}, each exactly once, in order`, async function () {
        this.timeout(120_000);
        const seen = await walk(limit);
        expect(seen).to.have.length(walkerEvents.length);
        expect(new Set(seen).size).to.equal(walkerEvents.length);
        expect(seen).to.deep.equal(byTimeDesc(walkerEvents));
      });
    }

    it('walks a filtered window with an odd page size', async () => {
      const seen = await walk(97, '&action=phi.read');
      expect(seen).to.deep.equal(byTimeDesc(walkerEvents.filter((event) => event.action === 'phi.read')));
    });

    it('refuses a tampered cursor with 422', async () => {
      const first = await list(walkerKey, '?limit=10');
      const cursor: string = first.json.page.next_cursor;
      const flipped = cursor.slice(0, 3) + (cursor[3] === 'A' ? 'B' : 'A') + cursor.slice(4);
      for (const bad of [flipped, `${cursor}x`, 'not-a-cursor', cursor.split('.')[0]!]) {
        const response = await list(walkerKey, `?limit=10&cursor=${encodeURIComponent(bad)}`);
        expect(response.status, bad).to.equal(422);
        expect(response.json.error).to.equal('validation_failed');
        expect(response.json.details[0].field).to.equal('cursor');
      }
    });

    it('refuses a cursor reused under other filters', async () => {
      const first = await list(walkerKey, '?limit=10&action=phi.read');
      const cursor = encodeURIComponent(first.json.page.next_cursor);
      expect((await list(walkerKey, `?limit=10&action=phi.read&cursor=${cursor}`)).status).to.equal(200);
      expect((await list(walkerKey, `?limit=50&action=phi.read&cursor=${cursor}`)).status).to.equal(200);
      expect((await list(walkerKey, `?limit=10&action=phi.query&cursor=${cursor}`)).status).to.equal(422);
      expect((await list(walkerKey, `?limit=10&cursor=${cursor}`)).status).to.equal(422);
      expect((await list(walkerKey, `?limit=10&action=phi.read&phi_involved=true&cursor=${cursor}`)).status).to.equal(422);
    });

    it("refuses another tenant's cursor", async () => {
      const first = await list(walkerKey, '?limit=10');
      const response = await list(keyA, `?limit=10&cursor=${encodeURIComponent(first.json.page.next_cursor)}`);
      expect(response.status).to.equal(422);
    });
  });

  describe('who acted and what was acted on: user_id and resource_id', () => {
    const T1 = T0 + 20 * HOUR;
    // One tenant's trail: two users touching two patients' records and a claim that shares an id with one of them.
    const trail = [
      newEvent({ tenantId: 'ward', occurredAtMs: T1 + 1, userId: 'dr-ames', resourceType: 'patient_record', resourceId: 'p-1' }),
      newEvent({ tenantId: 'ward', occurredAtMs: T1 + 2, userId: 'dr-ames', resourceType: 'patient_record', resourceId: 'p-2' }),
      newEvent({ tenantId: 'ward', occurredAtMs: T1 + 3, userId: 'nurse-bo', resourceType: 'patient_record', resourceId: 'p-1' }),
      newEvent({
        tenantId: 'ward',
        occurredAtMs: T1 + 4,
        userId: 'nurse-bo',
        resourceType: 'claim',
        resourceId: 'p-1',
        action: 'phi.query',
      }),
      newEvent({ tenantId: 'ward', occurredAtMs: T1 + 5, userId: 'DR-AMES', resourceType: 'patient_record', resourceId: 'P-1' }),
    ];
    // The same user and resource ids in another tenant: never part of an answer.
    const foreign = newEvent({
      tenantId: 'clinic',
      occurredAtMs: T1 + 1,
      userId: 'dr-ames',
      resourceType: 'patient_record',
      resourceId: 'p-1',
    });
    let wardKey: string;
    let clinicKey: string;

    before(async () => {
      await seedEvents(db.url, [...trail, foreign]);
      wardKey = (await mintKey(db.url, { tenantId: 'ward', scopes: ['audit:read'] })).key;
      clinicKey = (await mintKey(db.url, { tenantId: 'clinic', scopes: ['audit:read'] })).key;
    });

    const expectIds = async (query: string, expected: typeof trail) => {
      const response = await list(wardKey, `?${query}${SEEDED_WINDOW}`);
      expect(response.status, response.text).to.equal(200);
      expect(idsOf(response.json), query).to.deep.equal(byTimeDesc(expected));
    };

    it('answers what one user did, matching the id exactly (case and all)', async () => {
      await expectIds('user_id=dr-ames', [trail[0]!, trail[1]!]);
      await expectIds('user_id=DR-AMES', [trail[4]!]);
      await expectIds('user_id=dr-am', []);
    });

    it('answers who touched one record, with resource_type or without', async () => {
      await expectIds('resource_id=p-1', [trail[0]!, trail[2]!, trail[3]!]);
      await expectIds('resource_id=p-1&resource_type=patient_record', [trail[0]!, trail[2]!]);
      await expectIds('resource_id=p-1&resource_type=claim', [trail[3]!]);
    });

    it('combines them with each other and with the other filters', async () => {
      await expectIds('user_id=nurse-bo&resource_id=p-1', [trail[2]!, trail[3]!]);
      await expectIds('user_id=nurse-bo&resource_id=p-1&action=phi.query', [trail[3]!]);
      await expectIds(`user_id=dr-ames&since=${new Date(T1 + 2).toISOString()}`, [trail[1]!]);
      await expectIds('user_id=dr-ames&phi_involved=false', []);
    });

    it("never answers with another tenant's events of the same user or resource", async () => {
      const response = await list(clinicKey, `?user_id=dr-ames&resource_id=p-1${SEEDED_WINDOW}`);
      expect(idsOf(response.json)).to.deep.equal([foreign.eventId]);
    });

    it("walks one user's events page by page, exactly once each, through 600 sharing one millisecond", async function () {
      this.timeout(120_000);
      const crowded = T0 + 30 * HOUR;
      const mine = Array.from({ length: 600 }, () => newEvent({ tenantId: 'crowd', occurredAtMs: crowded, userId: 'batch-job' }));
      const others = Array.from({ length: 600 }, () => newEvent({ tenantId: 'crowd', occurredAtMs: crowded, userId: 'someone-else' }));
      await seedEvents(db.url, [...mine, ...others]);
      const key = (await mintKey(db.url, { tenantId: 'crowd', scopes: ['audit:read'] })).key;
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages < 100; pages += 1) {
        const response = await list(
          key,
          `?user_id=batch-job&limit=70${SEEDED_WINDOW}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        expect(response.status, response.text).to.equal(200);
        seen.push(...idsOf(response.json));
        cursor = response.json.page.next_cursor;
        if (!response.json.page.has_more) break;
      }
      expect(seen).to.deep.equal(byTimeDesc(mine));
    });

    it('binds the cursor to the user and the resource it was issued for', async () => {
      const first = await list(wardKey, `?user_id=dr-ames&limit=1${SEEDED_WINDOW}`);
      const cursor = encodeURIComponent(first.json.page.next_cursor);
      expect((await list(wardKey, `?user_id=dr-ames&limit=1${SEEDED_WINDOW}&cursor=${cursor}`)).status).to.equal(200);
      for (const other of ['user_id=nurse-bo', 'user_id=dr-ames&resource_id=p-1', 'resource_id=dr-ames', '']) {
        const response = await list(wardKey, `?${other}&limit=1${SEEDED_WINDOW}&cursor=${cursor}`);
        expect(response.status, other).to.equal(422);
        expect(response.json.details[0].field).to.equal('cursor');
      }
      // The same value as a user and as a resource are two different queries.
      const asResource = await list(wardKey, `?resource_id=p-1&limit=1${SEEDED_WINDOW}`);
      const resourceCursor = encodeURIComponent(asResource.json.page.next_cursor);
      expect((await list(wardKey, `?user_id=p-1&limit=1${SEEDED_WINDOW}&cursor=${resourceCursor}`)).status).to.equal(422);
    });
  });

  describe('invalid parameters', () => {
    const cases: Array<[string, string]> = [
      ['limit=0', 'limit'],
      ['limit=1001', 'limit'],
      ['limit=abc', 'limit'],
      ['limit=1.5', 'limit'],
      ['limit=-1', 'limit'],
      ['limit=%2B5', 'limit'],
      ['limit=1e2', 'limit'],
      ['limit=%205', 'limit'],
      ['phi_involved=yes', 'phi_involved'],
      ['phi_involved=TRUE', 'phi_involved'],
      ['phi_involved=1', 'phi_involved'],
      ['since=yesterday', 'since'],
      ['until=2026-13-01T00:00:00Z', 'until'],
      ['since=2026-02-30T00:00:00Z', 'since'],
      ['since=2026-10-01T00:00:00', 'since'],
      ['since=2026-10-02T00:00:00Z&until=2026-10-01T00:00:00Z', 'since'],
      ['since=2026-10-01T00:00:00Z&until=2026-10-01T00:00:00Z', 'since'],
      ['action=PHI.READ', 'action'],
      ['action=', 'action'],
      ['resource_type=', 'resource_type'],
      ['user_id=', 'user_id'],
      ['resource_id=', 'resource_id'],
      [`user_id=${'u'.repeat(257)}`, 'user_id'],
      [`resource_id=${'r'.repeat(257)}`, 'resource_id'],
      ['user_id=a&user_id=b', 'user_id'],
      ['colour=blue', 'colour'],
      ['tenant_id=tenant-b', 'tenant_id'],
      ['action=phi.read&action=phi.query', 'action'],
      ['limit=10&limit=20', 'limit'],
    ];
    for (const [query, field] of cases) {
      it(`answers 422 naming ${field} for ?${query}`, async () => {
        const response = await list(keyA, `?${query}`);
        expect(response.status, response.text).to.equal(422);
        expect(response.json.error).to.equal('validation_failed');
        const fields = response.json.details.map((detail: { field: string }) => detail.field);
        expect(fields).to.include(field);
        // The message names the field too, for logs and humans.
        expect(response.json.message).to.include(field);
      });
    }
  });

  describe('lookup by id', () => {
    it('returns the event itself, unwrapped', async () => {
      const source = tenantAEvents[1]!;
      const response = await call(`${api.baseUrl}/audit/events/${source.eventId}`, { key: keyA });
      expect(response.status).to.equal(200);
      expect(response.json.event_id).to.equal(source.eventId);
      expect(response.json.action).to.equal('phi.query');
      expect(response.json.fields_accessed).to.equal('["diagnosis"]');
    });

    it("answers 404 for another tenant's event, identical to an unknown id", async () => {
      const foreign = await call(`${api.baseUrl}/audit/events/${tenantBEvent.eventId}`, { key: keyA });
      const unknown = await call(`${api.baseUrl}/audit/events/${randomUUID()}`, { key: keyA });
      const malformed = await call(`${api.baseUrl}/audit/events/not-a-uuid`, { key: keyA });
      expect(foreign.status).to.equal(404);
      expect(foreign.text).to.equal(unknown.text);
      expect(malformed.status).to.equal(404);
      expect(malformed.text).to.equal(unknown.text);
      expect(foreign.json).to.deep.equal({ error: 'not_found', message: 'No event with this id.' });
    });

    it('finds the event for its own tenant', async () => {
      const own = await call(`${api.baseUrl}/audit/events/${tenantBEvent.eventId}`, { key: keyB });
      expect(own.status).to.equal(200);
      expect(own.json.tenant_id).to.equal('tenant-b');
    });

    it('answers the newest of two events a producer stored under one id, every time', async () => {
      const eventId = randomUUID();
      // The older one stored last, so that insertion order cannot pass for the rule.
      await seedEvents(db.url, [newEvent({ tenantId: 'reuser', eventId, occurredAtMs: T0 + 2 * HOUR, resourceId: 'newer' })]);
      await seedEvents(db.url, [newEvent({ tenantId: 'reuser', eventId, occurredAtMs: T0 - 40 * 24 * HOUR, resourceId: 'older' })]);
      const key = (await mintKey(db.url, { tenantId: 'reuser', scopes: ['audit:read'] })).key;
      for (let attempt = 0; attempt < 3; attempt += 1) {
        const response = await call(`${api.baseUrl}/audit/events/${eventId}`, { key });
        expect(response.status).to.equal(200);
        expect(response.json.resource_id).to.equal('newer');
      }
      const listed = (await list(key)).json.events as Array<{ event_id: string; resource_id: string }>;
      expect(listed.filter((event) => event.event_id === eventId).map((event) => event.resource_id)).to.deep.equal(['newer', 'older']);
    });

    it('refuses unknown query parameters on the lookup too', async () => {
      const response = await call(`${api.baseUrl}/audit/events/${tenantAEvents[0]!.eventId}?tenant_id=tenant-b`, { key: keyA });
      expect(response.status).to.equal(422);
    });
  });

  it('carries X-Request-Id on every response, echoing a sane one', async () => {
    const generated = await list(keyA);
    expect(generated.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
    const echoed = await call(`${api.baseUrl}/audit/events`, { key: keyA, headers: { 'x-request-id': 'trace-123' } });
    expect(echoed.headers.get('x-request-id')).to.equal('trace-123');
    const unauthenticated = await call(`${api.baseUrl}/audit/events`);
    expect(unauthenticated.status).to.equal(401);
    expect(unauthenticated.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
  });
});
