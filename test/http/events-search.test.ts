import { expect } from 'chai';
import { searchEventDocuments } from '../../src/events/eventSearch.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

const T0 = Date.parse('2026-10-01T00:00:00.000Z');
const MINUTE = 60_000;
// Minting a key records admin.key.create in the tenant's trail "now"; seeded events all precede this.
const SEEDED = 'until=2026-11-01T00:00:00Z';

/**
 * The list's search (q), action families (action_prefix), the count and the tenant's actions (docs/api.md
 * "Search, families and counts"): what a person looking for an event types, answered from the real service.
 */
describe('GET /audit/events?q=, action_prefix=, /audit/events/count and /audit/actions', () => {
  let db: TestDatabase;
  let api: TestService;
  let key: string;
  let otherKey: string;
  const chart = newEvent({
    occurredAtMs: T0 + 1 * MINUTE,
    action: 'phi.read',
    userId: 'Dr-House',
    resourceType: 'chart',
    resourceId: 'PATIENT-7',
  });
  const claim = newEvent({
    occurredAtMs: T0 + 2 * MINUTE,
    action: 'phi.query',
    userId: 'billing-1',
    resourceType: 'claim',
    resourceId: 'c-17',
  });
  const login = newEvent({
    occurredAtMs: T0 + 3 * MINUTE,
    action: 'auth.login',
    userId: 'dr-house',
    resourceType: 'session',
    resourceId: 's-1',
  });
  const phiAlone = newEvent({ occurredAtMs: T0 + 4 * MINUTE, action: 'phi', userId: 'u-9', resourceType: 'x', resourceId: 'x-1' });
  const phizzle = newEvent({ occurredAtMs: T0 + 5 * MINUTE, action: 'phizzle.open', userId: 'u-9', resourceType: 'x', resourceId: 'x-2' });
  const export1 = newEvent({
    occurredAtMs: T0 + 6 * MINUTE,
    action: 'phi.export',
    userId: 'u-2',
    resourceType: 'upload',
    resourceId: 'u-up',
  });
  const ours = [chart, claim, login, phiAlone, phizzle, export1];
  const theirs = newEvent({ tenantId: 'tenant-b', occurredAtMs: T0, action: 'phi.read', userId: 'dr-house', resourceId: 'patient-7' });

  const list = async (query: string, as = key) => {
    const response = await call(`${api.baseUrl}/audit/events?${query}`, { key: as });
    expect(response.status, response.text).to.equal(200);
    return response.json as { events: Array<{ event_id: string }>; page: Record<string, unknown> };
  };
  const ids = (body: { events: Array<{ event_id: string }> }) => body.events.map((event) => event.event_id);
  const newestFirst = (...events: typeof ours) => [...events].sort((a, b) => b.occurredAtMs - a.occurredAtMs).map((event) => event.eventId);

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, [...ours, theirs]);
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    key = (await mintKey(db.url, { tenantId: 'tenant-a', scopes: ['audit:read'] })).key;
    otherKey = (await mintKey(db.url, { tenantId: 'tenant-b', scopes: ['audit:read'] })).key;
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  describe('search', () => {
    it('finds a part of the user, the resource, the action or the id, whatever its case', async () => {
      expect(ids(await list(`q=house&${SEEDED}`))).to.deep.equal(newestFirst(chart, login));
      expect(ids(await list(`q=patient-7&${SEEDED}`))).to.deep.equal([chart.eventId]);
      expect(ids(await list(`q=QUERY&${SEEDED}`))).to.deep.equal([claim.eventId]);
      expect(ids(await list(`q=${export1.eventId.slice(9, 23).toUpperCase()}&${SEEDED}`))).to.deep.equal([export1.eventId]);
      expect(ids(await list(`q=upload&${SEEDED}`))).to.deep.equal([export1.eventId]);
    });

    it('combines with the filters, and finds nothing of another tenant', async () => {
      expect(ids(await list(`q=house&action=auth.login&${SEEDED}`))).to.deep.equal([login.eventId]);
      expect(ids(await list(`q=house&${SEEDED}`, otherKey))).to.deep.equal([theirs.eventId]);
      expect(ids(await list(`q=billing&${SEEDED}`, otherKey))).to.deep.equal([]);
    });

    it('pages a search with a cursor bound to its text', async () => {
      const first = await list(`q=house&limit=1&${SEEDED}`);
      expect(first.page).to.include({ returned: 1, has_more: true });
      const second = await list(`q=house&limit=1&${SEEDED}&cursor=${first.page.next_cursor}`);
      expect(ids(second)).to.deep.equal([chart.eventId]);
      expect(second.page).to.include({ has_more: false, next_cursor: null });
      expect(second.page).not.to.have.property('searched_to');
      const reused = await call(`${api.baseUrl}/audit/events?q=billing&limit=1&${SEEDED}&cursor=${first.page.next_cursor}`, { key });
      expect(reused.status).to.equal(422);
      expect(reused.json.details[0].field).to.equal('cursor');
    });

    it('refuses an empty or overlong search with 422 naming q', async () => {
      for (const q of ['', '%20%20', 'x'.repeat(101)]) {
        const response = await call(`${api.baseUrl}/audit/events?q=${q}`, { key });
        expect(response.status, q).to.equal(422);
        expect(response.json.details[0].field).to.equal('q');
      }
    });

    it('walks at most its bound per page, says how far it searched, and its cursor searches on from there', async () => {
      // The store's walk with a bound of 2 events: the API's is SEARCH_SCAN_ROWS, too many to seed here.
      const filters = { untilMs: Date.parse('2026-11-01T00:00:00Z'), search: 'house' };
      const first = await searchEventDocuments(db.pool, 'tenant-a', filters, undefined, 11, 2);
      // The two newest (export1, phizzle) hold no "house": nothing found, and the walk stopped at phizzle.
      expect(first.documents).to.deep.equal([]);
      expect(first.searchedTo).to.deep.equal({ occurredAtMs: phizzle.occurredAtMs, eventId: phizzle.eventId });
      const second = await searchEventDocuments(db.pool, 'tenant-a', filters, first.searchedTo, 11, 2);
      expect(second.documents.map((document) => JSON.parse(document).event_id)).to.deep.equal([login.eventId]);
      const third = await searchEventDocuments(db.pool, 'tenant-a', filters, second.searchedTo, 11, 2);
      expect(third.documents.map((document) => JSON.parse(document).event_id)).to.deep.equal([chart.eventId]);
      // Its walk ended on the window's last event: one more page says there is nothing further.
      const fourth = await searchEventDocuments(db.pool, 'tenant-a', filters, third.searchedTo, 11, 2);
      expect(fourth).to.deep.equal({ documents: [], searchedTo: undefined });
    });
  });

  describe('action families', () => {
    it('matches as webhook filters do: phi. the family, phi the family and phi itself, never phizzle', async () => {
      expect(ids(await list(`action_prefix=phi.&${SEEDED}`))).to.deep.equal(newestFirst(chart, claim, export1));
      expect(ids(await list(`action_prefix=phi&${SEEDED}`))).to.deep.equal(newestFirst(chart, claim, phiAlone, export1));
      expect(ids(await list(`action_prefix=nothing.&${SEEDED}`))).to.deep.equal([]);
    });

    it('pages a family in list order, each event once', async () => {
      const seen: string[] = [];
      let cursor = '';
      for (let page = 0; page < 5; page += 1) {
        const body = await list(`action_prefix=phi&limit=1&${SEEDED}${cursor}`);
        seen.push(...ids(body));
        if (!body.page.has_more) break;
        cursor = `&cursor=${body.page.next_cursor}`;
      }
      expect(seen).to.deep.equal(newestFirst(chart, claim, phiAlone, export1));
    });

    it('refuses a prefix that is no action family with 422', async () => {
      const response = await call(`${api.baseUrl}/audit/events?action_prefix=PHI*`, { key });
      expect(response.status).to.equal(422);
      expect(response.json.details[0].field).to.equal('action_prefix');
    });
  });

  describe('the count', () => {
    it('counts what the filters match, families included', async () => {
      const count = async (query: string) => (await call(`${api.baseUrl}/audit/events/count?${query}`, { key })).json;
      expect(await count(SEEDED)).to.deep.equal({ count: ours.length, capped: false });
      expect(await count(`action_prefix=phi.&${SEEDED}`)).to.deep.equal({ count: 3, capped: false });
      expect(await count(`user_id=dr-house&${SEEDED}`)).to.deep.equal({ count: 1, capped: false });
      expect(await count('action_prefix=none.')).to.deep.equal({ count: 0, capped: false });
    });

    it('says "more" past its cap rather than counting on', async () => {
      const events = Array.from({ length: 10_002 }, (_, index) => newEvent({ tenantId: 'tenant-big', occurredAtMs: T0 + index }));
      await seedEvents(db.url, events);
      const bigKey = (await mintKey(db.url, { tenantId: 'tenant-big', scopes: ['audit:read'] })).key;
      const response = await call(`${api.baseUrl}/audit/events/count?${SEEDED}`, { key: bigKey });
      expect(response.json).to.deep.equal({ count: 10_000, capped: true });
    });

    it('takes no search, cursor or page size (422)', async () => {
      for (const query of ['q=house', 'limit=5', 'cursor=abc']) {
        expect((await call(`${api.baseUrl}/audit/events/count?${query}`, { key })).status, query).to.equal(422);
      }
    });
  });

  describe("the tenant's actions", () => {
    it("lists the tenant's distinct actions, sorted, and nothing of another tenant", async () => {
      const response = await call(`${api.baseUrl}/audit/actions`, { key });
      expect(response.status).to.equal(200);
      // The key's own minting is in the trail too.
      expect(response.json).to.deep.equal({
        actions: ['admin.key.create', 'auth.login', 'phi', 'phi.export', 'phi.query', 'phi.read', 'phizzle.open'],
        truncated: false,
      });
      expect((await call(`${api.baseUrl}/audit/actions`, { key: otherKey })).json.actions).to.deep.equal(['admin.key.create', 'phi.read']);
    });
  });
});
