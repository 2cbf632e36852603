import { expect } from 'chai';
import { eventLeafHash } from '../../src/client/integrity.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

const T0 = Date.parse('2026-10-09T12:00:00.000Z');

/**
 * A sealed event's leaf is the hash of the event as the API serves it, and what the API serves for a
 * sealed event must never change: a later document version, a new renderer, a changed EVENT_JSON would
 * each break every proof of the events sealed before it. This test is the guard: every way of reading an
 * event (list, lookup, export in both formats) must re-hash to the leaf stored in the tree, for an event
 * stored with its document and for one stored before documents existed.
 */
describe('served form of sealed events', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let api: TestService;
  let key: string;
  const legacyId = '00000000-0000-4000-8000-0000000c0de5';
  const stored = [
    newEvent({
      eventId: '0195f3a0-0000-7000-8000-000000000001',
      tenantId: 'served',
      occurredAtMs: T0,
      userAgent: 'tab\there "quoted" \\ é 😀 \u2028',
      details: '{"note":"ünïcode \\u0001"}',
    }),
    newEvent({
      eventId: '0195f3a0-0000-7000-8000-000000000002',
      tenantId: 'served',
      occurredAtMs: T0 + 1,
      phiInvolved: false,
      fieldsAccessed: '',
      justification: 'break-glass',
    }),
  ];
  /**
   * The leaves these fixed events got when this test was written. A change of the served form (of the
   * stored document's reading, or of EVENT_JSON for rows without one) changes them, and every proof of
   * events sealed before it: such a change must serve sealed events as before, not edit this list.
   */
  const PINNED_LEAVES: Record<string, string> = {
    '00000000-0000-4000-8000-0000000c0de5': 'd531d87d90af38ea0cce8118340d5dafd5a216b535cb1194155399958b978884',
    '0195f3a0-0000-7000-8000-000000000001': 'ac83790af6611b967a14d409c91b236ba9253ce06e558f748ea801c67bcea764',
    '0195f3a0-0000-7000-8000-000000000002': 'c250fd2bd9a179ac70c441e2983d63185d5895c559934a73e7d5858759f225d1',
  };

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, stored);
    await db.pool.query(
      `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, phi_involved, success, user_agent, details)
       VALUES ('served', $1, $2, 'phi.read', 'legacy "user"', 'clinician', 'claim', 'c-1', true, false, E'old\\tagent', '{"a":1}')`,
      [new Date(T0 + 2).toISOString(), legacyId],
    );
    const sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    await sealer.sealNow();
    await sealer.close();
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    key = (await mintKey(db.url, { tenantId: 'served', scopes: ['audit:read', 'audit:export'] })).key;
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  it('list, lookup and export serve every sealed event in the form its leaf was computed from', async () => {
    const { rows } = await db.pool.query(
      `SELECT l.event_id::text, l.leaf_index, t.hashes FROM merkle_leaves l
         JOIN merkle_tiles t ON t.tenant_id = l.tenant_id AND t.level = 0 AND t.tile_index = l.leaf_index / 16
        WHERE l.tenant_id = 'served'`,
    );
    const leaves = new Map<string, string>(
      rows.map((row: { event_id: string; leaf_index: number; hashes: Buffer }) => {
        const offset = (row.leaf_index % 16) * 32;
        return [row.event_id, row.hashes.subarray(offset, offset + 32).toString('hex')];
      }),
    );
    expect([...leaves.keys()].sort()).to.deep.equal([...stored.map((event) => event.eventId), legacyId].sort());
    expect(Object.fromEntries([...leaves].sort())).to.deep.equal(PINNED_LEAVES);
    const window = { until: '2026-10-10T00:00:00Z' };
    const listed = (await call(`${api.baseUrl}/audit/events?until=${window.until}`, { key })).json.events;
    const exportedJson = (await call(`${api.baseUrl}/audit/export`, { key, body: window })).json.events;
    const exportedNdjson = (await call(`${api.baseUrl}/audit/export?format=ndjson`, { key, body: window })).text.trimEnd().split('\n');
    for (const [eventId, leaf] of leaves) {
      const lookedUp = await call(`${api.baseUrl}/audit/events/${eventId}`, { key });
      const forms = {
        lookup: lookedUp.text,
        list: listed.find((event: { event_id: string }) => event.event_id === eventId),
        export: exportedJson.find((event: { event_id: string }) => event.event_id === eventId),
        ndjson: exportedNdjson.find((line) => line.includes(eventId)),
      };
      for (const [how, form] of Object.entries(forms)) {
        expect(form, `${how} of ${eventId}`).to.not.equal(undefined);
        expect(eventLeafHash(form!), `${how} of ${eventId}`).to.equal(leaf);
      }
    }
  });
});
