import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { runVerify } from '../../src/client/cli/verifyCommand.ts';
import { verifyExport } from '../../src/client/exportVerifier.ts';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
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

/** Collects what a stream is sent, as text. */
function sink(): Writable & { text(): string } {
  let text = '';
  const stream = new Writable({
    write(chunk, _encoding, done) {
      text += String(chunk);
      done();
    },
  });
  return Object.assign(stream, { text: () => text });
}

type Line = Record<string, any>;
const lines = (text: string): Line[] =>
  text
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line));
const ndjson = (records: readonly Line[]) => `${records.map((record) => JSON.stringify(record)).join('\n')}\n`;

/**
 * The customer-side verifiers and expiry, on real Postgres: a tenant with a 1-day policy whose five oldest
 * events expired exports (with proofs) a record of each expired leaf, so that `verify --complete` proves
 * every leaf and reports those five as expired, not missing; forged records and tampered events still fail.
 */
describe('verifying an export of a trail that had expiries', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let database: Database;
  let sealer: TestSealer;
  let api: TestService;
  let key: string;
  let globexKey: string;
  let directory: string;
  let publicKeyFile: string;
  const seal = sealKeyPair();
  const now = Date.now();
  const expiring = [
    ...[3, 2.5, 2].map((days) => newEvent({ tenantId: 'acme', occurredAtMs: now - days * DAY, action: 'phi.read' })),
    ...[1.8, 1.5].map((days) => newEvent({ tenantId: 'acme', occurredAtMs: now - days * DAY, action: 'phi.export' })),
  ];
  const kept = [HOUR, 2 * HOUR].map((ago) => newEvent({ tenantId: 'acme', occurredAtMs: now - ago, action: 'phi.read' }));
  const globex = [
    newEvent({ tenantId: 'globex', occurredAtMs: now - 3 * DAY }),
    newEvent({ tenantId: 'globex', occurredAtMs: now - HOUR }),
  ];

  before(async () => {
    db = await createTestDatabase();
    directory = await mkdtemp(join(tmpdir(), 'expired-export-'));
    publicKeyFile = join(directory, 'public.pem');
    await writeFile(publicKeyFile, seal.publicPem);
    database = new Database({ url: db.url, poolSize: 4, applicationName: 'test expired export', log: testLogger() });
    const writer = new EventWriter(database, WEBHOOK_FAN_OUT);
    const policies = new RetentionPolicies({ db: database, writer, defaultPeriod: undefined });
    await seedEvents(db.url, [...expiring, ...kept, ...globex]);
    sealer = await startTestSealer(db.url, seal.privateKey);
    await sealer.sealNow();
    await policies.declare({ tenantId: 'acme', period: parseRetentionPeriod('1d')!, locked: false, archive: null }, 'test:acme', OPERATOR);
    const expiry = new Expiry({ db: database, writer, policies, batchSize: 2, actor: OPERATOR, log: testLogger() });
    const run = await expiry.run('acme');
    expect(run.tenants[0]!.expired?.count).to.equal(expiring.length);
    // The policy's and the expiry's own events become leaves too.
    await sealer.sealNow();
    key = (await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read', 'audit:export'] })).key;
    globexKey = (await mintKey(db.url, { tenantId: 'globex', scopes: ['audit:read', 'audit:export'] })).key;
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
  });

  after(async () => {
    await api?.stop();
    await sealer?.close();
    await database?.close();
    await db?.drop();
    if (directory) await rm(directory, { recursive: true, force: true });
  });

  async function exportText(format: 'json' | 'ndjson', body: object = {}, apiKey = key): Promise<string> {
    const response = await call(`${api.baseUrl}/audit/export?format=${format}&proofs=true`, { key: apiKey, body });
    expect(response.status, response.text.slice(0, 300)).to.equal(200);
    return response.text;
  }

  async function cli(text: string, ...extra: string[]): Promise<{ code: number; out: string; err: string }> {
    const file = join(directory, `export-${Math.random().toString(36).slice(2)}.txt`);
    await writeFile(file, text);
    const out = sink();
    const err = sink();
    const code = await runVerify(['--export', file, '--public-key', publicKeyFile, ...extra], out, err, 'audit-trail');
    return { code, out: out.text(), err: err.text() };
  }

  const verifyComplete = (exportText: string) =>
    verifyExport({ exportText, trustedKeys: [{ public_key_pem: seal.publicPem }], complete: true });

  it('exports a record of each expired leaf with its proof, and verify --complete reports them as expired (JSON)', async () => {
    const exported = JSON.parse(await exportText('json'));
    expect(exported.events.map((event: Line) => event.event_id)).to.not.include.members(expiring.map((event) => event.eventId));
    expect(exported.expired.map((record: Line) => record.expired.event_id)).to.have.members(expiring.map((event) => event.eventId));
    for (const record of exported.expired) {
      expect(record.expired).to.include({ retain: '1d', source: 'policy' });
      expect(record.proof).to.include({ leaf_index: record.expired.leaf_index, leaf_hash: record.expired.leaf_hash });
    }
    const report = verifyComplete(JSON.stringify(exported));
    expect(report.failures).to.deep.equal([]);
    expect(report.expired.map((leaf) => leaf.eventId)).to.have.members(expiring.map((event) => event.eventId));
    expect(report.proven).to.equal(exported.events.filter((event: Line) => event.proof !== null).length);
    // Every leaf below the head is an event of the export or an expired leaf.
    expect(report.proven + report.expired.length).to.equal(exported.tree_head.tree_size);
  });

  it('does the same for NDJSON, and the CLI prints each expired leaf and the count', async () => {
    const text = await exportText('ndjson');
    const records = lines(text).filter((line) => line.expired);
    expect(records).to.have.length(expiring.length);
    for (const record of records) expect(record.tree_head).to.be.an('object');
    const { code, out, err } = await cli(text, '--complete');
    expect(err).to.equal('');
    expect(code).to.equal(0);
    expect(out).to.include(`, ${expiring.length} expired (leaf proven, content gone)`);
    for (const event of expiring) expect(out).to.match(new RegExp(`event ${event.eventId}, [^)]+\\): expired at .*retain 1d, policy`));
  });

  it('without the records, verify --complete still names the expired leaves as lacking', async () => {
    const text = ndjson(lines(await exportText('ndjson')).filter((line) => !line.expired));
    const { code, err } = await cli(text, '--complete');
    expect(code).to.equal(1);
    expect(err).to.include('is said to be complete but lacks the events of leaves');
  });

  it('counts a leaf once when pages of one head repeat its record, and fails two records that disagree on a leaf', async () => {
    const first = await exportText('ndjson');
    const head = lines(first)[0]!.tree_head.tree_size;
    const response = await call(`${api.baseUrl}/audit/export?format=ndjson&proofs=true&tree_size=${head}`, {
      key,
      body: { until: new Date(now - DAY).toISOString() },
    });
    expect(response.status).to.equal(200);
    const pages = `${first}${response.text}`;
    const report = verifyComplete(pages);
    expect(report.failures).to.deep.equal([]);
    expect(report.expired).to.have.length(expiring.length);
    const [record, other] = lines(first).filter((line) => line.expired);
    const clash = { ...other!, expired: { ...other!.expired, event_id: record!.expired.event_id } };
    const clashing = verifyComplete(`${first}${ndjson([clash])}`);
    expect(clashing.failures.map((failure) => failure.reason)).to.include(
      `the record that its leaf expired: two records say leaf ${other!.expired.leaf_index} expired, for events ${other!.expired.event_id} and ${record!.expired.event_id}`,
    );
  });

  it('catches a forged record that says an event still served expired', async () => {
    const exported = lines(await exportText('ndjson'));
    const served = exported.find((line) => line.event_id === kept[0]!.eventId)!;
    const forged = {
      expired: {
        ...exported.find((line) => line.expired)!.expired,
        event_id: served.event_id,
        leaf_index: served.proof.leaf_index,
        leaf_hash: served.proof.leaf_hash,
      },
      proof: served.proof,
      tree_head: served.tree_head,
    };
    const report = verifyComplete(ndjson([...exported, forged]));
    expect(report.failures.map((failure) => failure.reason)).to.satisfy((reasons: string[]) =>
      reasons.some((reason) => reason.includes(`is proven at leaf ${served.proof.leaf_index}, so that leaf's event did not expire`)),
    );
    // The same record at another leaf's position with the served event's id: the export serves that event.
    const expiredRecord = exported.find((line) => line.expired)!;
    const renamed = { ...expiredRecord, expired: { ...expiredRecord.expired, event_id: served.event_id } };
    const replaced = exported.filter((line) => line !== expiredRecord);
    const second = verifyComplete(ndjson([...replaced, renamed]));
    expect(second.failures.map((failure) => failure.reason)).to.include(
      'the record that its leaf expired: the export serves that event, so it did not expire',
    );
  });

  it('fails a record whose leaf hash or leaf index is not the proven one', async () => {
    const exported = lines(await exportText('ndjson'));
    const record = exported.find((line) => line.expired)!;
    const rest = exported.filter((line) => line !== record);
    const otherHash = 'ab'.repeat(32);
    const wrongHash = { ...record, expired: { ...record.expired, leaf_hash: otherHash }, proof: { ...record.proof, leaf_hash: otherHash } };
    const hashReport = verifyComplete(ndjson([...rest, wrongHash]));
    expect(hashReport.failures).to.not.deep.equal([]);
    expect(hashReport.expired).to.have.length(expiring.length - 1);
    const wrongIndex = { ...record, expired: { ...record.expired, leaf_index: record.expired.leaf_index + 1 } };
    const indexReport = verifyComplete(ndjson([...rest, wrongIndex]));
    expect(indexReport.failures.map((failure) => failure.reason)).to.include(
      `the record that its leaf expired: its proof is for leaf ${record.expired.leaf_index}, not leaf ${record.expired.leaf_index + 1}`,
    );
  });

  it('still names a tampered event in an export with expired leaves', async () => {
    const exported = lines(await exportText('ndjson'));
    const target = exported.find((line) => line.event_id === kept[1]!.eventId)!;
    target.action = 'phi.delete';
    const { code, err } = await cli(ndjson(exported), '--complete');
    expect(code).to.equal(1);
    expect(err).to.include(`event ${kept[1]!.eventId}: the event does not hash to the proof's leaf_hash`);
  });

  it('lists only the expired leaves in the export time window, and nothing for a trail without expiry', async () => {
    const recent = JSON.parse(await exportText('json', { since: new Date(now - DAY).toISOString() }));
    expect(recent).to.not.have.property('expired');
    const window = JSON.parse(
      await exportText('json', { since: new Date(now - 2.2 * DAY).toISOString(), until: new Date(now - 1.6 * DAY).toISOString() }),
    );
    expect(window.expired.map((record: Line) => record.expired.event_id)).to.have.members([expiring[2]!.eventId, expiring[3]!.eventId]);
    const other = JSON.parse(await exportText('json', {}, globexKey));
    expect(Object.keys(other)).to.deep.equal(['events', 'count', 'truncated', 'tree_head']);
    expect(other.events.map((event: Line) => event.event_id)).to.include.members(globex.map((event) => event.eventId));
    expect(lines(await exportText('ndjson', {}, globexKey)).every((line) => typeof line.event_id === 'string')).to.equal(true);
  });
});
