import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import S3rver from 's3rver';
import { runVerify } from '../../src/client/cli/verifyCommand.ts';
import { verifyStreamCopy } from '../../src/client/streamCopyVerifier.ts';
import { Database } from '../../src/db/database.ts';
import type { StreamRegistry } from '../../src/streams/streamRegistry.ts';
import { StreamRunner } from '../../src/streams/streamRunner.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { freePort } from '../support/ports.ts';
import { TEST_ENCRYPTION_KEY, testLogger } from '../support/service.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { OcsfValidator } from '../support/ocsfValidator.ts';
import { waitFor } from '../support/wait.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';

const ACTOR = { userId: 'test', userRole: 'operator' };

/**
 * "Each batch can carry the tenant's latest signed tree head, so a SIEM copy can later be checked with
 * `audit-trail verify`": a real stream writes its batches to an S3-compatible server (s3rver) and to an
 * HTTPS collector; the objects and bodies as they arrived are verified offline against the heads they carry.
 */
describe('log streams: verifying a SIEM copy offline', function () {
  this.timeout(120_000);
  const keys = sealKeyPair();
  let db: TestDatabase;
  let pool: Database;
  let sealer: TestSealer;
  let registry: StreamRegistry;
  let runner: StreamRunner;
  let s3rver: S3rver;
  let endpoint: string;
  let collector: TestReceiver;
  let directory: string;

  before(async () => {
    directory = mkdtempSync(join(tmpdir(), 'audit-trail-copy-'));
    db = await createTestDatabase();
    pool = new Database({ url: db.url, poolSize: 4, applicationName: 'copy test', log: testLogger() });
    sealer = await startTestSealer(db.url, keys.privateKey);
    registry = testStreamRegistry(pool);
    const port = await freePort();
    s3rver = new S3rver({
      port,
      address: '127.0.0.1',
      silent: true,
      directory: join(directory, 's3'),
      configureBuckets: [{ name: 'siem-copy', configs: [] }],
    });
    await s3rver.run();
    endpoint = `http://127.0.0.1:${port}`;
    collector = await startReceiver(204);
    writeFileSync(join(directory, 'audit-public.pem'), keys.publicPem);
    startRunner();
  });

  after(async () => {
    await runner?.stop();
    await collector?.close();
    await s3rver?.close();
    await sealer?.close();
    await pool?.close();
    await db?.drop();
    rmSync(directory, { recursive: true, force: true });
  });

  function startRunner(): void {
    runner = new StreamRunner({
      db: pool,
      secrets: new SecretBox(TEST_ENCRYPTION_KEY),
      destinations: { timeoutMs: 5_000, allowPrivateTargets: true },
      pollMs: 50,
      leaseMs: 5_000,
      capacity: 100,
      failingRetryMs: 200,
      log: testLogger(),
    });
    runner.start();
  }

  async function write(tenantId: string, count: number): Promise<void> {
    await seedEvents(
      db.url,
      Array.from({ length: count }, () => newEvent({ tenantId })),
    );
    await sealer.sealNow();
  }

  const caughtUp = async (tenantId: string, id: string) => (await registry.state(tenantId, id)).lagEvents === 0;

  async function objects(prefix: string): Promise<Array<{ key: string; bytes: Buffer }>> {
    const s3 = new S3Client({
      region: 'us-east-1',
      endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'siem-copy', Prefix: prefix }));
    const found = [];
    for (const { Key } of listed.Contents ?? []) {
      const object = await s3.send(new GetObjectCommand({ Bucket: 'siem-copy', Key: Key! }));
      found.push({ key: Key!, bytes: Buffer.from(await object.Body!.transformToByteArray()) });
    }
    s3.destroy();
    return found;
  }

  async function verify(files: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const sink = (append: (text: string) => void) =>
      new Writable({
        write(chunk, _encoding, done) {
          append(String(chunk));
          done();
        },
      });
    const args = [...files.flatMap((file) => ['--stream-copy', file]), '--public-key', join(directory, 'audit-public.pem')];
    const code = await runVerify(
      args,
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

  it('verifies the S3 objects of a backfilled stream with `audit-trail verify --stream-copy`, and finds a changed event', async () => {
    await write('acme', 12);
    const { stream } = await registry.create(
      'acme',
      {
        destination: {
          type: 's3',
          bucket: 'siem-copy',
          prefix: 'audit',
          region: 'us-east-1',
          endpoint,
          access_key_id: 'S3RVER',
          secret_access_key: 'S3RVER',
          force_path_style: true,
        },
        start_at: '2020-01-01T00:00:00Z',
      },
      ACTOR,
    );
    await sealer.sealNow();
    await waitFor(() => caughtUp('acme', stream.id), 'the first batches', 60_000);
    await write('acme', 20);
    await waitFor(() => caughtUp('acme', stream.id), 'the later batches', 60_000);

    const found = await objects('audit/acme/');
    expect(found.length).to.be.greaterThan(1);
    const files = found.map(({ key, bytes }, index) => {
      const file = join(directory, `${index}-${key.split('/').at(-1)}`);
      writeFileSync(file, bytes);
      return file;
    });
    // 12 + the stream's own admin.stream.create + 20: every leaf of the trail, the last head covering all.
    const good = await verify(files);
    expect(good.err).to.equal('');
    expect(good.code).to.equal(0);
    expect(good.out).to.match(/^verified: \d+ records; tenant acme: 33 events \(33 proven against the tree head of size 33 /);

    // One field of one event changed in one object: the roots no longer match.
    const last = files.at(-1)!;
    const lines = gunzipSync(readFileSync(last)).toString('utf8').trimEnd().split('\n');
    const index = lines.findIndex((line) => line.includes('"event_id"'));
    lines[index] = lines[index]!.replace(/"action":"[^"]+"/, '"action":"phi.nothing_to_see"');
    writeFileSync(last, gzipSync(`${lines.join('\n')}\n`));
    const tampered = await verify(files);
    expect(tampered.code).to.equal(1);
    expect(tampered.err).to.include('do not reproduce the root of the tree head of size 33');

    // Without the first object, the copy no longer starts at the tenant's first event: said, not passed.
    const partial = await verify(files.slice(1));
    expect(partial.code).to.equal(1);
    expect(partial.err).to.include('nothing could be verified: the copy starts at leaf');
  });

  it("verifies an OCSF stream's S3 objects, OCSF events only, with the tree heads' objects beside them", async () => {
    await write('initech', 9);
    const { stream } = await registry.create(
      'initech',
      {
        destination: {
          type: 's3',
          bucket: 'siem-copy',
          prefix: 'ocsf',
          region: 'us-east-1',
          endpoint,
          access_key_id: 'S3RVER',
          secret_access_key: 'S3RVER',
          force_path_style: true,
        },
        format: 'ocsf',
        start_at: '2020-01-01T00:00:00Z',
      },
      ACTOR,
    );
    await sealer.sealNow();
    await waitFor(() => caughtUp('initech', stream.id), 'the batches', 60_000);
    const records = await objects('ocsf/initech/');
    expect(records.length).to.be.greaterThan(0);
    // Every record an OCSF event, valid by the schema of OCSF 1.7.0 (the default release).
    const validator = new OcsfValidator('1.7.0');
    for (const { bytes } of records)
      for (const line of gunzipSync(bytes).toString('utf8').trimEnd().split('\n'))
        expect(validator.problems(JSON.parse(line))).to.deep.equal([]);
    const heads = await objects('ocsf/_tree_heads/initech/');
    expect(heads.length).to.be.greaterThan(0);
    const files = [...records, ...heads].map(({ key, bytes }, index) => {
      const file = join(directory, `ocsf-${index}-${key.split('/').at(-1)}`);
      writeFileSync(file, bytes);
      return file;
    });
    const checked = await verify(files);
    expect(checked.err).to.equal('');
    expect(checked.out).to.match(/tenant initech: 10 events \(10 proven against the tree head of size 10 /);
    expect(checked.code).to.equal(0);
    // The records alone prove nothing: the heads were beside them.
    const without = await verify(files.slice(0, records.length));
    expect(without.code).to.equal(1);
  });

  it("verifies an HTTPS collector's OCSF batches, as received, with the client's verifyStreamCopy (repeats dropped)", async () => {
    await write('globex', 7);
    const { stream } = await registry.create(
      'globex',
      { destination: { type: 'https', url: collector.url }, format: 'ocsf', ocsf_version: '1.3.0', start_at: '2020-01-01T00:00:00Z' },
      ACTOR,
    );
    await sealer.sealNow();
    await waitFor(() => caughtUp('globex', stream.id), 'the batches', 60_000);
    const texts = collector.received.map((delivery) => gunzipSync(delivery.rawBody).toString('utf8'));
    // Nothing but OCSF 1.3.0 events in the bodies, the release the stream asked for: the tree heads came in a
    // header, which the receiver keeps.
    const validator = new OcsfValidator('1.3.0');
    for (const line of texts.flatMap((text) => text.trimEnd().split('\n'))) expect(validator.problems(JSON.parse(line))).to.deep.equal([]);
    const heads = collector.received.map((delivery) =>
      Buffer.from(String(delivery.headers['x-audit-tree-head']), 'base64url').toString('utf8'),
    );
    expect(JSON.parse(heads.at(-1)!).tree_head).to.include({ tenant_id: 'globex' });
    // At least once: a batch sent twice is in the copy twice.
    const report = verifyStreamCopy({ texts: [...texts, texts[0]!, heads.join('\n')], trustedKeys: [{ public_key_pem: keys.publicPem }] });
    expect(report.failures).to.deep.equal([]);
    const [tenant] = report.tenants;
    expect(tenant).to.include({ tenantId: 'globex', events: 8, uncovered: 0 });
    expect(tenant!.repeats).to.be.greaterThan(0);
    expect(tenant!.verifiedHead!.tree_size).to.equal(8);
  });
});
