import { expect } from 'chai';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { keepEntryBundle, keptEntryBundle } from '../../src/integrity/entryBundleStore.ts';
import { bundleOfKeptEntries, keptEntriesText } from '../../src/integrity/entryBundles.ts';
import { encodeEntryBundle } from '../../src/integrity/tlogTiles.ts';
import { HASH_BYTES } from '../../src/integrity/tiles.ts';
import { TransparencyLog } from '../../src/integrity/transparencyLog.ts';
import { Expiry } from '../../src/lifecycle/expiry.ts';
import { redactEvent } from '../../src/lifecycle/redactions.ts';
import { RetentionPolicies } from '../../src/lifecycle/retentionPolicies.ts';
import { hashLeaf } from '../../src/client/merkleHash.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { seedEvents } from '../support/events.ts';
import { newEvent } from '../support/newEvents.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { testLogger } from '../support/service.ts';
import { decodeBundle } from '../support/entryBundles.ts';

const DAY = 86_400_000;
const OPERATOR = { userId: 'test-operator', userRole: 'operator' };
const FIRST_BUNDLE = { level: 'entries' as const, index: 0, width: 256 };
const FIRST_TILE = { level: 0, index: 0, width: 256 };

/**
 * Full entry bundles kept in Postgres (migration 031, integrity/entryBundleStore.ts): served from the store
 * once built, by any instance, and never after a redaction or an expiry that changed them, even when they
 * were kept before it, or built from events read before it.
 */
describe('entry bundles kept in the database', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let database: Database;
  let sealer: TestSealer;
  let writer: EventWriter;
  const now = Date.now();
  // Three old events among 300: a 1-day policy expires exactly them.
  const trail = (tenantId: string) =>
    Array.from({ length: 300 }, (_, i) =>
      newEvent({ tenantId, occurredAtMs: i < 3 ? now - 3 * DAY + i : now - 3_600_000 + i, details: JSON.stringify({ note: `n${i}` }) }),
    );
  const events = { a: trail('bundles-a'), b: trail('bundles-b') };

  before(async () => {
    db = await createTestDatabase();
    database = new Database({ url: db.url, poolSize: 4, applicationName: 'test entry bundles', log: testLogger() });
    writer = new EventWriter(database, WEBHOOK_FAN_OUT);
    await seedEvents(db.url, [...events.a, ...events.b]);
    sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    await sealer.sealNow();
  });

  after(async () => {
    await sealer?.close();
    await database?.close();
    await db?.drop();
  });

  const bundleOf = async (tenantId: string, log = new TransparencyLog(database)) =>
    decodeBundle((await log.entryBundle(tenantId, FIRST_BUNDLE)).body);
  const keptRows = async (tenantId: string) =>
    (await database.pool.query('SELECT bundle_index::int, generation::int FROM merkle_entry_bundles WHERE tenant_id = $1', [tenantId]))
      .rows;
  const leafHashes = async (tenantId: string) => (await new TransparencyLog(database).hashTile(tenantId, FIRST_TILE)).body;
  const entryEventId = (entry: Buffer) => (JSON.parse(entry.toString()) as { event_id: string }).event_id;

  it('serves kept entries as the very bundle they were kept from, ASCII or not', () => {
    for (const entries of [
      ['{"a":"1"}', '{"b":"22"}', '{}'],
      ['{"note":"é \\"q\\""}', '{"x":"日本"}', '{"emoji":"😀"}', '{"a":"1"}'],
    ].map((texts) => texts.map((text) => Buffer.from(text)))) {
      expect(bundleOfKeptEntries(keptEntriesText(entries)!).equals(encodeEntryBundle(entries))).to.equal(true);
    }
    expect(keptEntriesText([Buffer.from('{"a":"1\n"}')])).to.equal(undefined);
  });

  it('keeps a full bundle once built and serves it from the store, to any instance, per tenant', async () => {
    const built = await bundleOf('bundles-a');
    expect(built).to.have.length(256);
    expect(await keptRows('bundles-a')).to.deep.equal([{ bundle_index: 0, generation: 0 }]);
    // Another instance (a fresh TransparencyLog) serves the kept row itself: marked, it comes back marked.
    await database.pool.query(`UPDATE merkle_entry_bundles SET entries = entries || E'\\n{}' WHERE tenant_id = 'bundles-a'`);
    const served = await bundleOf('bundles-a');
    expect(served).to.have.length(257);
    expect(served.slice(0, 256).map(String)).to.deep.equal(built.map(String));
    expect(String(served[256])).to.equal('{}');
    await database.pool.query(`UPDATE merkle_entry_bundles SET entries = left(entries, -3) WHERE tenant_id = 'bundles-a'`);
    // The other tenant's bundle is built from its own events, not served from the first's row.
    const other = await bundleOf('bundles-b');
    expect(other.map(entryEventId).sort()).to.not.deep.equal(built.map(entryEventId).sort());
    const hashes = await leafHashes('bundles-b');
    for (const [i, entry] of other.entries())
      expect(hashLeaf(entry).equals(hashes.subarray(i * HASH_BYTES, (i + 1) * HASH_BYTES))).to.equal(true);
  });

  it('serves a bundle kept before a redaction with the entry redacted once the redaction has committed', async () => {
    const log = new TransparencyLog(database);
    const before = await bundleOf('bundles-a', log);
    const target = entryEventId(before[7]!);
    await redactEvent(writer, { tenantId: 'bundles-a', eventId: target, fields: ['details.note'], reference: 'DSR-1' }, OPERATOR);
    // The kept bundle held the event as it was: the redaction removed it with its own commit.
    expect(await keptRows('bundles-a')).to.deep.equal([]);
    const after = await bundleOf('bundles-a', log);
    const redacted = JSON.parse(after[7]!.toString());
    expect(redacted.event_id).to.equal(target);
    expect(redacted.redaction.leaf_hash).to.equal((await leafHashes('bundles-a')).subarray(7 * HASH_BYTES, 8 * HASH_BYTES).toString('hex'));
    expect(after[6]!.equals(before[6]!)).to.equal(true);
    // Kept again, at the generation the redaction moved on to; the other tenant's kept bundle is untouched.
    expect(await keptRows('bundles-a')).to.deep.equal([{ bundle_index: 0, generation: 1 }]);
    expect(await keptRows('bundles-b')).to.deep.equal([{ bundle_index: 0, generation: 0 }]);
  });

  it('never keeps nor serves a bundle built from events read before a redaction that committed first', async () => {
    // A build that read the generation, then its events, before the redaction, and comes to keep it after.
    const stale = await keptEntryBundle(database, 'bundles-a', 0);
    const staleEntries = keptEntriesText(decodeBundle((await new TransparencyLog(database).entryBundle('bundles-a', FIRST_BUNDLE)).body))!;
    const target = entryEventId((await bundleOf('bundles-a'))[9]!);
    await redactEvent(writer, { tenantId: 'bundles-a', eventId: target, fields: ['details.note'], reference: 'DSR-2' }, OPERATOR);
    await keepEntryBundle(database, 'bundles-a', 0, stale.generation, staleEntries);
    expect(await keptRows('bundles-a')).to.deep.equal([]);
    // Served from a row of that generation all the same (written by hand): the generation keeps it out.
    await database.pool.query('INSERT INTO merkle_entry_bundles (tenant_id, bundle_index, generation, entries) VALUES ($1, 0, $2, $3)', [
      'bundles-a',
      stale.generation,
      staleEntries,
    ]);
    const served = await bundleOf('bundles-a');
    expect(JSON.parse(served[9]!.toString()).redaction.history[0].reference).to.equal('DSR-2');
  });

  it('waits for a redaction or expiry under way before keeping a bundle, then keeps nothing', async () => {
    const { generation } = await keptEntryBundle(database, 'bundles-b', 0);
    await database.pool.query('DELETE FROM merkle_entry_bundles WHERE tenant_id = $1', ['bundles-b']);
    // What the trigger of a redaction or an expiry does first, in a transaction not yet committed.
    const change = await database.pool.connect();
    try {
      await change.query('BEGIN');
      await change.query('UPDATE merkle_bundle_generations SET generation = generation + 1 WHERE tenant_id = $1', ['bundles-b']);
      let kept = false;
      const keeping = keepEntryBundle(database, 'bundles-b', 0, generation, '{}').then(() => {
        kept = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(kept).to.equal(false);
      await change.query('COMMIT');
      await keeping;
    } finally {
      change.release();
    }
    expect(await keptRows('bundles-b')).to.deep.equal([]);
  });

  it('serves a bundle kept before an expiry with the expired entries saying so', async () => {
    const log = new TransparencyLog(database);
    const before = await bundleOf('bundles-a', log);
    const policies = new RetentionPolicies({ db: database, writer, defaultPeriod: undefined });
    await policies.declare({ tenantId: 'bundles-a', period: parseRetentionPeriod('1d')!, locked: false, archive: null }, 'test', OPERATOR);
    const expiry = new Expiry({ db: database, writer, policies, batchSize: 100, actor: OPERATOR, log: testLogger() });
    await expiry.run('bundles-a');
    expect(await keptRows('bundles-a')).to.deep.equal([]);
    const after = await bundleOf('bundles-a', log);
    const old = new Set(events.a.slice(0, 3).map((event) => event.eventId));
    const expired = after.map((entry) => JSON.parse(entry.toString())).filter((entry) => entry.expired !== undefined);
    expect(expired.map((entry) => entry.event_id).sort()).to.deep.equal([...old].sort());
    expect(expired.every((entry) => entry.expired.retain === '1d')).to.equal(true);
    expect(before.filter((entry) => old.has(entryEventId(entry)))).to.have.length(3);
  });
});
