import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import S3rver from 's3rver';
import { runVerify } from '../../src/client/cli/verifyCommand.ts';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { currentArchiveFailure } from '../../src/lifecycle/archiveOutcomeStore.ts';
import { ArchiveStore } from '../../src/lifecycle/archiveStore.ts';
import { Expiry } from '../../src/lifecycle/expiry.ts';
import { RetentionPolicies } from '../../src/lifecycle/retentionPolicies.ts';
import { ServiceMetrics } from '../../src/platform/metrics.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { freePort } from '../support/ports.ts';
import { TEST_PEPPER, testLogger } from '../support/service.ts';
import { expiryMetrics } from '../../src/lifecycle/expiryMetrics.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const OPERATOR = { userId: 'test-operator', userRole: 'operator' };
const BUCKET = 'audit-archive';
const run = promisify(execFile);
const S3_KEYS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/**
 * Archive before expiry on real Postgres and an S3-compatible server (s3rver): a tenant with a 1-day policy
 * and `archive` loses its expired events only once they are in objects read back intact, and those objects
 * verify offline with `audit-trail verify`; with the store down, or answering other bytes than were written,
 * nothing expires.
 */
describe('archive before expiry', function () {
  this.timeout(120_000);
  const keys = sealKeyPair();
  let db: TestDatabase;
  let database: Database;
  let writer: EventWriter;
  let sealer: TestSealer;
  let s3rver: S3rver;
  let endpoint: string;
  let directory: string;
  const now = Date.now();
  const expiring = [0, 1, 2, 3, 4].map((n) => newEvent({ tenantId: 'acme', occurredAtMs: now - 3 * DAY + n * HOUR, action: 'phi.read' }));
  const kept = [newEvent({ tenantId: 'acme', occurredAtMs: now - HOUR, action: 'phi.read' })];
  const seeded = new Set([...expiring, ...kept].map((event) => event.eventId));

  before(async () => {
    directory = mkdtempSync(join(tmpdir(), 'audit-trail-archive-'));
    db = await createTestDatabase();
    database = new Database({ url: db.url, poolSize: 4, applicationName: 'test archive', log: testLogger() });
    writer = new EventWriter(database, WEBHOOK_FAN_OUT);
    await seedEvents(db.url, [...expiring, ...kept]);
    sealer = await startTestSealer(db.url, keys.privateKey);
    await sealer.sealNow();
    const policies = new RetentionPolicies({ db: database, writer, defaultPeriod: undefined });
    await policies.declare(
      { tenantId: 'acme', period: parseRetentionPeriod('1d')!, locked: false, archive: { bucket: BUCKET, prefix: 'trail/' } },
      'test:acme',
      OPERATOR,
    );
    const port = await freePort();
    s3rver = new S3rver({
      port,
      address: '127.0.0.1',
      silent: true,
      directory: join(directory, 's3'),
      configureBuckets: [{ name: BUCKET, configs: [] }],
    });
    await s3rver.run();
    endpoint = `http://127.0.0.1:${port}`;
    writeFileSync(join(directory, 'audit-public.pem'), keys.publicPem);
  });

  after(async () => {
    await s3rver?.close();
    await sealer?.close();
    await database?.close();
    await db?.drop();
    if (directory) rmSync(directory, { recursive: true, force: true });
  });

  function expiryThrough(storeEndpoint: string, metrics: ServiceMetrics): { expiry: Expiry; store: ArchiveStore } {
    const store = new ArchiveStore({ region: 'us-east-1', endpoint: storeEndpoint, forcePathStyle: true, ...S3_KEYS });
    const policies = new RetentionPolicies({ db: database, writer, defaultPeriod: undefined });
    const expiry = new Expiry({
      db: database,
      writer,
      policies,
      batchSize: 2,
      actor: OPERATOR,
      log: testLogger(),
      metrics,
      archiveStore: store,
      archiveObjectEvents: 2,
    });
    return { expiry, store };
  }

  const stored = async () =>
    (await database.pool.query('SELECT event_id::text FROM events WHERE tenant_id = $1', ['acme'])).rows
      .map((row) => row.event_id as string)
      .filter((id) => seeded.has(id))
      .sort();
  const ids = (events: Array<{ eventId: string }>) => events.map((event) => event.eventId).sort();
  const failures = async (metrics: ServiceMetrics) =>
    (await expiryMetrics(metrics).archives.get()).values.find((value) => value.labels.outcome === 'failed')?.value ?? 0;

  async function objects(): Promise<Array<{ key: string; bytes: Buffer }>> {
    const s3 = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: S3_KEYS });
    try {
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'trail/acme/' }));
      const found = [];
      for (const { Key } of listed.Contents ?? []) {
        // Downloaded as any client would, over plain HTTP with fetch: it must arrive as the gzip file it is named.
        const response = await fetch(`${endpoint}/${BUCKET}/${Key!}`);
        expect(response.headers.get('content-type'), Key).to.equal('application/gzip');
        expect(response.headers.get('content-encoding'), Key).to.equal(null);
        const bytes = Buffer.from(await response.arrayBuffer());
        expect([...bytes.subarray(0, 2)], `${Key}: gzip's magic bytes`).to.deep.equal([0x1f, 0x8b]);
        found.push({ key: Key!, bytes });
      }
      return found;
    } finally {
      s3.destroy();
    }
  }

  it('refuses, in the database, a batch of an archiving tenant that names no archive object', async () => {
    const refused = await database.pool
      .query(
        `INSERT INTO expiry_batches (tenant_id, kept_since, retain, source, batch_limit, requested_by)
         VALUES ('acme', now() - interval '2 days', '1d', 'policy', 10, 'test')`,
      )
      .then(
        () => 'allowed',
        (error: { code?: string }) => error.code,
      );
    expect(refused).to.equal('42501');
    expect(await stored()).to.deep.equal(ids([...expiring, ...kept]));
  });

  it('expires nothing while the store is down, and reports it (result, metric)', async () => {
    const closedPort = await freePort();
    const metrics = new ServiceMetrics();
    const { expiry, store } = expiryThrough(`http://127.0.0.1:${closedPort}`, metrics);
    try {
      const result = await expiry.run('acme');
      const acme = result.tenants.find((tenant) => tenant.tenantId === 'acme')!;
      expect(acme.archiveFailure).to.match(/^writing s3:\/\/audit-archive\/trail\/acme\/.* failed/);
      expect(acme.expired!.count).to.equal(0);
      expect(await failures(metrics)).to.equal(1);
      // What the controller shows on the RetentionPolicy (test/lifecycle/retention-policies.test.ts).
      expect((await currentArchiveFailure(database.pool, 'acme'))?.reason).to.equal(acme.archiveFailure);
    } finally {
      await store.close();
    }
    expect(await stored()).to.deep.equal(ids([...expiring, ...kept]));
  });

  it('expires nothing when the object read back differs from what was written', async () => {
    // A loopback proxy in front of s3rver that passes writes through and flips one byte of every object read.
    const proxy = await startCorruptingProxy(endpoint);
    const metrics = new ServiceMetrics();
    const { expiry, store } = expiryThrough(proxy.url, metrics);
    try {
      const result = await expiry.run('acme');
      const acme = result.tenants.find((tenant) => tenant.tenantId === 'acme')!;
      expect(acme.archiveFailure).to.match(/read back \d+ bytes hashing [0-9a-f]{64}, not the \d+ written/);
      expect(acme.expired!.count).to.equal(0);
      expect(await failures(metrics)).to.equal(1);
    } finally {
      await store.close();
      await new Promise((resolve) => proxy.server.close(resolve));
    }
    expect(await stored()).to.deep.equal(ids([...expiring, ...kept]));
  });

  it('archives then expires, range by range, in objects that verify offline with `audit-trail verify`', async () => {
    const before = new Set((await objects()).map((object) => object.key));
    const metrics = new ServiceMetrics();
    const { expiry, store } = expiryThrough(endpoint, metrics);
    let result: Awaited<ReturnType<Expiry['run']>>;
    try {
      result = await expiry.run('acme');
    } finally {
      await store.close();
    }
    const acme = result.tenants.find((tenant) => tenant.tenantId === 'acme')!;
    expect(acme.archiveFailure).to.equal(undefined);
    expect(acme.expired!.count).to.equal(5);
    expect(await currentArchiveFailure(database.pool, 'acme')).to.equal(undefined);
    expect(await stored()).to.deep.equal(ids(kept));
    // Two events per object: three objects, oldest first in key order, named prefix/tenant/yyyy/mm/first_last_random.
    const written = (await objects()).filter((object) => !before.has(object.key));
    expect(written.map((object) => object.key)).to.deep.equal(acme.archives!.map((archive) => archive.key));
    expect(acme.archives!.map((archive) => archive.count)).to.deep.equal([2, 2, 1]);
    const month = new Date(expiring[0]!.occurredAtMs).toISOString().slice(0, 7).replace('-', '/');
    for (const object of written)
      expect(object.key).to.match(
        new RegExp(`^trail/acme/${month}/\\d{8}T\\d{6}\\.\\d{3}Z_\\d{8}T\\d{6}\\.\\d{3}Z_[0-9a-f]{8}\\.ndjson\\.gz$`),
      );
    // Each batch of the pass names the object it relied on.
    const batches = await database.pool.query('SELECT archive_key FROM expiry_batches WHERE tenant_id = $1 ORDER BY id', ['acme']);
    expect(new Set(batches.rows.map((row) => row.archive_key))).to.deep.equal(new Set(acme.archives!.map((archive) => archive.key)));
    // Offline: every archived event is there, each with its proof against a signed head.
    const archivedIds: string[] = [];
    for (const [index, object] of written.entries()) {
      const text = gunzipSync(object.bytes).toString('utf8');
      for (const line of text.trim().split('\n')) archivedIds.push((JSON.parse(line) as { event_id: string }).event_id);
      // As stored: `audit-trail verify --export` reads the gzipped object itself.
      const file = join(directory, `archive-${index}.ndjson.gz`);
      writeFileSync(file, object.bytes);
      const verified = await verify(['--export', file]);
      expect(verified.code, verified.err).to.equal(0);
      expect(verified.out).to.match(
        new RegExp(`${acme.archives![index]!.count} events, ${acme.archives![index]!.count} proven against the tree head`),
      );
    }
    expect(archivedIds.sort()).to.deep.equal(ids(expiring));
    // A changed byte of content is caught by the same command.
    const tampered = gunzipSync(written[0]!.bytes).toString('utf8').replace('"phi.read"', '"phi.reax"');
    writeFileSync(join(directory, 'tampered.ndjson'), tampered);
    expect((await verify(['--export', join(directory, 'tampered.ndjson')])).code).to.equal(1);
    // Every run is in the tenant's trail: the two that failed with their reasons, this one with its objects.
    const { rows } = await database.pool.query(
      "SELECT details FROM event_fields WHERE tenant_id = 'acme' AND action = 'audit.retention.expire' ORDER BY occurred_at",
    );
    const details = rows.map((row) => JSON.parse(row.details));
    expect(details.map((detail) => [detail.count, detail.archive_failure === null])).to.deep.equal([
      [0, false],
      [0, false],
      [5, true],
    ]);
    expect(details[2].archives.map((archive: { key: string }) => archive.key)).to.deep.equal(acme.archives!.map((archive) => archive.key));
  });

  it('removes, under an archive object, only the events recorded in it: a late event of the range stays', async () => {
    // A producer's retry stored after the object was read, with a timestamp inside its range.
    const late = newEvent({ tenantId: 'acme', occurredAtMs: now - 3 * DAY + 30 * 60_000, action: 'phi.read' });
    seeded.add(late.eventId);
    await seedEvents(db.url, [late]);
    const { rows } = await database.pool.query(
      "SELECT archive_key FROM expiry_batches WHERE tenant_id = 'acme' AND archive_key IS NOT NULL LIMIT 1",
    );
    await database.pool.query(
      `INSERT INTO expiry_batches (tenant_id, kept_since, retain, source, batch_limit, requested_by, archive_key)
       VALUES ('acme', now() - interval '2 days', '1d', 'policy', 100, 'test', $1)`,
      [rows[0].archive_key],
    );
    expect(await stored()).to.deep.equal(ids([...kept, late]));
  });

  it('from the CLI: `retention plan` names the archive; `retention run` exits 1 with the store down, and archives then expires with it up', async () => {
    // The late event of the previous test, sealed now: the next pass archives and expires it.
    await sealer.sealNow();
    const cli = async (storeEndpoint: string, ...args: string[]) =>
      run(process.execPath, ['src/cli.ts', 'retention', ...args], {
        env: {
          PATH: process.env.PATH ?? '',
          DATABASE_URL: db.url,
          KEY_PEPPER: TEST_PEPPER,
          ARCHIVE_S3_ENDPOINT: storeEndpoint,
          ARCHIVE_S3_FORCE_PATH_STYLE: 'true',
          ARCHIVE_S3_ACCESS_KEY_ID: S3_KEYS.accessKeyId,
          ARCHIVE_S3_SECRET_ACCESS_KEY: S3_KEYS.secretAccessKey,
        },
      }).then(
        ({ stdout }) => ({ code: 0, stdout }),
        (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
      );
    const plan = await cli(endpoint, 'plan', '--tenant', 'acme');
    expect(plan.stdout).to.match(
      /^acme {2}1d \(policy\) {2}before \S+ {2}archived first to s3:\/\/audit-archive\/trail\/\n {2}\d{4}-\d{2} {2}expiring 1 {2}held 0\n$/,
    );
    const down = await cli(`http://127.0.0.1:${await freePort()}`, 'run', '--tenant', 'acme', '--json');
    expect(down.code).to.equal(1);
    expect(JSON.parse(down.stdout).tenants[0]).to.include({ tenant_id: 'acme' }).and.have.property('archive_failure');
    expect(await stored()).to.have.length(2);
    const up = await cli(endpoint, 'run', '--tenant', 'acme', '--json');
    expect(up.code, up.stdout).to.equal(0);
    const [tenant] = JSON.parse(up.stdout).tenants;
    expect(tenant.expired.count).to.equal(1);
    expect(tenant.archives).to.have.length(1);
    expect((await objects()).map((object) => object.key)).to.include(tenant.archives[0].key);
    expect(await stored()).to.deep.equal(ids(kept));
  });

  async function verify(args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const sink = (append: (text: string) => void) =>
      new Writable({
        write(chunk, _encoding, done) {
          append(String(chunk));
          done();
        },
      });
    const code = await runVerify(
      [...args, '--public-key', join(directory, 'audit-public.pem')],
      sink((text) => {
        out += text;
      }),
      sink((text) => {
        err += text;
      }),
      'audit-trail',
    );
    return { code, out, err };
  }
});

/** Forwards to `target`; a successful GET's body comes back with its middle byte flipped, its length unchanged. */
async function startCorruptingProxy(target: string): Promise<{ server: Server; url: string }> {
  const upstream = new URL(target);
  const server = createServer((incoming, outgoing) => {
    const forwarded = request(
      { host: upstream.hostname, port: upstream.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const body = Buffer.concat(chunks);
          if (incoming.method === 'GET' && response.statusCode === 200 && body.length > 0) body[body.length >> 1]! ^= 0xff;
          outgoing.writeHead(response.statusCode ?? 502, response.headers);
          outgoing.end(body);
        });
      },
    );
    forwarded.on('error', () => outgoing.destroy());
    incoming.pipe(forwarded);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${port}` };
}
