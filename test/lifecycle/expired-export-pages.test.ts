import { expect } from 'chai';
import { verifyExport } from '../../src/client/exportVerifier.ts';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventExporter } from '../../src/events/eventExport.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { expiredLeavesCut } from '../../src/integrity/expiredEvents.ts';
import { EXPIRED_RECORD_CAP } from '../../src/integrity/exportProofs.ts';
import { IntegrityReader } from '../../src/integrity/integrityReader.ts';
import { Expiry } from '../../src/lifecycle/expiry.ts';
import { RetentionPolicies } from '../../src/lifecycle/retentionPolicies.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, testLogger, type TestService } from '../support/service.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const OPERATOR = { userId: 'test-operator', userRole: 'operator' };

type Line = Record<string, any>;
const lines = (text: string): Line[] =>
  text
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line));

/**
 * An export with proofs lists its records of expired leaves within bounds (docs/integrity.md "Expired events
 * in an export"): more than EXPIRED_RECORD_CAP expired leaves (three to a millisecond) come in pages that
 * end on a millisecond boundary, events included, and a walk with `until` lists each leaf once. Before the
 * bound, one export listed every expired leaf of its window, each page of a walk all of them again.
 */
describe('an export of a trail with more expired leaves than one export lists', function () {
  this.timeout(300_000);
  let db: TestDatabase;
  let database: Database;
  let sealer: TestSealer;
  let api: TestService;
  let key: string;
  const seal = sealKeyPair();
  const now = Date.now();
  const oldest = now - 3 * DAY;
  // Three to a millisecond, so that a cut anywhere would split one if it did not keep whole milliseconds.
  const expiring = Array.from({ length: EXPIRED_RECORD_CAP + 500 }, (_, index) =>
    newEvent({ tenantId: 'acme', occurredAtMs: oldest + Math.floor(index / 3), action: 'phi.read' }),
  );
  const expiringSpanMs = Math.ceil(expiring.length / 3);
  // Stored with old timestamps after the expiry (a producer's late retries): served, among the expired leaves.
  const late = Array.from({ length: 40 }, (_, index) =>
    newEvent({ tenantId: 'acme', occurredAtMs: oldest + Math.floor((index * expiringSpanMs) / 40) + 1, action: 'phi.export' }),
  );
  const kept = [HOUR, 2 * HOUR].map((ago) => newEvent({ tenantId: 'acme', occurredAtMs: now - ago, action: 'phi.read' }));

  before(async () => {
    db = await createTestDatabase();
    database = new Database({ url: db.url, poolSize: 4, applicationName: 'test expired export pages', log: testLogger() });
    const writer = new EventWriter(database, WEBHOOK_FAN_OUT);
    const policies = new RetentionPolicies({ db: database, writer, defaultPeriod: undefined });
    await seedEvents(db.url, [...expiring, ...kept]);
    sealer = await startTestSealer(db.url, seal.privateKey);
    await sealer.sealNow();
    await policies.declare({ tenantId: 'acme', period: parseRetentionPeriod('1d')!, locked: false, archive: null }, 'test:acme', OPERATOR);
    const expiry = new Expiry({ db: database, writer, policies, batchSize: 5000, actor: OPERATOR, log: testLogger() });
    expect((await expiry.run('acme')).tenants[0]!.expired?.count).to.equal(expiring.length);
    await seedEvents(db.url, late);
    await sealer.sealNow();
    key = (await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read', 'audit:export'] })).key;
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
  });

  after(async () => {
    await api?.stop();
    await sealer?.close();
    await database?.close();
    await db?.drop();
  });

  async function page(format: 'json' | 'ndjson', body: object, treeSize?: number) {
    const size = treeSize === undefined ? '' : `&tree_size=${treeSize}`;
    const response = await call(`${api.baseUrl}/audit/export?format=${format}&proofs=true${size}`, { key, body });
    expect(response.status, response.text.slice(0, 300)).to.equal(200);
    return { text: response.text, truncated: response.headers.get('x-service-truncated') === 'true' };
  }

  it('lists at most the cap in one export, truncated, ending on a millisecond boundary (JSON)', async () => {
    const first = JSON.parse((await page('json', {})).text);
    expect(first.truncated).to.equal(true);
    expect(first.expired.length).to.be.within(EXPIRED_RECORD_CAP - 2, EXPIRED_RECORD_CAP);
    const stamps = first.expired.map((record: Line) => Date.parse(record.expired.timestamp));
    expect(stamps).to.deep.equal(
      [...stamps].sort((a, b) => b - a),
      'newest first',
    );
    const cut = Math.min(...stamps);
    // Every expired leaf of the cut's millisecond is in, and the events end at the same boundary.
    expect(stamps.filter((stamp: number) => stamp === cut)).to.have.length(expiring.filter((event) => event.occurredAtMs === cut).length);
    const served = first.events.map((event: Line) => event.event_id);
    expect(served).to.include.members(late.filter((event) => event.occurredAtMs >= cut).map((event) => event.eventId));
    const older = new Set(late.filter((event) => event.occurredAtMs < cut).map((event) => event.eventId));
    expect(older.size).to.be.greaterThan(0);
    expect(served.filter((id: string) => older.has(id))).to.deep.equal([]);
  });

  it('walks every expired leaf and event exactly once with until, and verify --complete proves the pages', async () => {
    let { text, truncated } = await page('ndjson', {});
    const treeSize = lines(text)[0]!.tree_head.tree_size as number;
    let pages = text;
    let count = 1;
    while (truncated) {
      const until = lines(text)
        .map((line) => (line.expired ? line.expired.timestamp : line.timestamp) as string)
        .sort()[0]!;
      ({ text, truncated } = await page('ndjson', { until }, treeSize));
      expect(lines(text).filter((line) => line.expired).length).to.be.at.most(EXPIRED_RECORD_CAP);
      pages += text;
      count += 1;
    }
    expect(count).to.equal(2);
    const all = lines(pages);
    const recorded = all.filter((line) => line.expired).map((line) => line.expired.event_id as string);
    expect(recorded).to.have.length(expiring.length);
    expect(new Set(recorded)).to.deep.equal(new Set(expiring.map((event) => event.eventId)));
    const served = all.filter((line) => !line.expired).map((line) => line.event_id as string);
    expect(served).to.have.length(new Set(served).size);
    expect(served).to.include.members([...late, ...kept].map((event) => event.eventId));
    const report = verifyExport({ exportText: pages, trustedKeys: [{ public_key_pem: seal.publicPem }], complete: true });
    expect(report.failures).to.deep.equal([]);
    expect(report.expired).to.have.length(expiring.length);
  });

  it('keeps whole milliseconds at the cut, beyond the cap when one millisecond holds more', async () => {
    const window = { untilMs: oldest + 10 };
    const treeSize = Number.MAX_SAFE_INTEGER;
    // Three leaves in each millisecond from oldest to oldest+9. The newest five reach into oldest+8: four keep
    // oldest+9's three only; the newest seven reach into oldest+7: six keep oldest+8 and oldest+9.
    expect(await expiredLeavesCut(database, 'acme', treeSize, window, 4)).to.equal(oldest + 9);
    expect(await expiredLeavesCut(database, 'acme', treeSize, window, 6)).to.equal(oldest + 8);
    expect(await expiredLeavesCut(database, 'acme', treeSize, window, 30)).to.equal(undefined);
    // Two to keep, three in the newest millisecond: that millisecond, whole.
    expect(await expiredLeavesCut(database, 'acme', treeSize, window, 2)).to.equal(oldest + 9);
  });

  it('narrows the events of an export to its expired leaves’ cut, and marks it truncated', async () => {
    const exporter = new EventExporter(database);
    const reader = new IntegrityReader(database, 'test-pepper-0123456789abcdef0123456789');
    // [oldest+170, oldest+180): thirty expired leaves and the late event at oldest+176.
    const untilMs = oldest + 180;
    const session = await exporter.open('acme', { untilMs }, { shareSnapshot: true });
    try {
      expect(session.truncated).to.equal(false);
      const { proofs, expiredWindow } = await reader.openExportProofs('acme', session, { untilMs, expiredCap: 30 });
      try {
        expect(session.truncated).to.equal(true);
        expect(expiredWindow).to.deep.equal({ sinceMs: untilMs - 10, untilMs });
        const events: string[] = [];
        for await (const row of session.rows()) events.push(JSON.parse(row).event_id);
        const records: string[] = [];
        for await (const record of proofs.expiredRecords(expiredWindow, 'json')) records.push(JSON.parse(record).expired.event_id);
        expect(records).to.have.length(30);
        const inWindow = (ms: number) => ms >= untilMs - 10 && ms < untilMs;
        expect(events).to.have.members(late.filter((event) => inWindow(event.occurredAtMs)).map((event) => event.eventId));
      } finally {
        await proofs.close();
      }
    } finally {
      await session.close();
    }
  });
});
