import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, normalize } from 'node:path';
import S3rver from 's3rver';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { redactEvent } from '../../src/lifecycle/redactions.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { runGoTlogClient } from '../support/go-tlog-client.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { freePort } from '../support/ports.ts';
import { call, mintKey, startTestService, testLogger, type TestService } from '../support/service.ts';
import { decodeBundle } from '../support/entryBundles.ts';

const T0 = Date.parse('2026-11-30T10:00:00.000Z');
const TENANT = 'static-a';
const BUCKET = 'audit-static';
const S3_KEYS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/**
 * `audit-trail integrity publish`: a static copy of a tenant's log, served by a plain file server with no API
 * key, is a log the Go checksum database client verifies (checkpoint, inclusion, consistency across two
 * publications), whose entry bundles are written again after a redaction; and the same files land in an S3-compatible bucket (s3rver) with tlog-tiles' cache headers.
 */
describe('a static copy of a tenant log (integrity publish)', function () {
  this.timeout(180_000);
  let db: TestDatabase;
  let api: TestService;
  let sealer: TestSealer;
  let key: string;
  let dir: string;
  let files: Server;
  let filesUrl: string;
  let s3rver: S3rver;
  let endpoint: string;

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(
      db.url,
      Array.from({ length: 300 }, (_, i) =>
        newEvent({ tenantId: TENANT, occurredAtMs: T0 + i, details: JSON.stringify({ note: `n${i}` }) }),
      ),
    );
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    key = (await mintKey(db.url, { tenantId: TENANT, scopes: ['audit:read'] })).key;
    sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    await sealer.sealNow();
    dir = mkdtempSync(join(tmpdir(), 'audit-static-'));
    files = createServer((request, response) => {
      // A bare static server: the file at the path, or 404; it knows nothing of logs or keys.
      const path = normalize(decodeURIComponent(new URL(request.url ?? '/', 'http://x').pathname)).replace(/^\/+/, '');
      try {
        const body = readFileSync(join(dir, 'copy', path));
        response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
      } catch {
        response.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
    filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
    const port = await freePort();
    s3rver = new S3rver({
      port,
      address: '127.0.0.1',
      silent: true,
      directory: join(dir, 's3'),
      configureBuckets: [{ name: BUCKET, configs: [] }],
    });
    await s3rver.run();
    endpoint = `http://127.0.0.1:${port}`;
  });

  after(async () => {
    await s3rver?.close();
    await new Promise((resolve) => files?.close(resolve));
    await sealer?.close();
    await api?.stop();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // Asynchronous: the bucket (s3rver) answers from this very process.
  const publish = (...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile(
        process.execPath,
        ['src/cli.ts', 'integrity', 'publish', '--tenant', TENANT, ...args],
        {
          encoding: 'utf8',
          env: {
            PATH: process.env.PATH,
            DATABASE_URL: db.url,
            LOG_LEVEL: 'silent',
            ARCHIVE_S3_ENDPOINT: endpoint,
            ARCHIVE_S3_FORCE_PATH_STYLE: 'true',
            ARCHIVE_S3_ACCESS_KEY_ID: S3_KEYS.accessKeyId,
            ARCHIVE_S3_SECRET_ACCESS_KEY: S3_KEYS.secretAccessKey,
          },
        },
        (error, stdout, stderr) => resolve({ status: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const vkey = async () => (await call(`${api.baseUrl}/audit/integrity/verifier-key`, { key })).text.trim();

  it('writes checkpoint and tiles that a bare file server serves to the Go client, then only what is new', async () => {
    const first = await publish('--directory', join(dir, 'copy'));
    expect(first.stderr).to.equal('');
    expect(first.status).to.equal(0);
    expect(first.stdout).to.equal(`published tenant ${TENANT}'s log at 301 leaves to ${join(dir, 'copy')} (7 files; it held 0)\n`);
    // The same bytes as the API serves.
    const served = Buffer.from(
      await (await fetch(`${api.baseUrl}/audit/integrity/tile/0/000`, { headers: { authorization: `Bearer ${key}` } })).arrayBuffer(),
    );
    expect(readFileSync(join(dir, 'copy', 'tile/0/000')).equals(served)).to.equal(true);
    const verified = await runGoTlogClient({ prefix: filesUrl, apiKey: 'none', vkey: await vkey(), leaves: [0, 255, 300] });
    expect(verified.stderr).to.equal('');
    expect(verified.status).to.equal(0);
    writeFileSync(join(dir, 'first.checkpoint'), readFileSync(join(dir, 'copy', 'checkpoint')));

    await seedEvents(
      db.url,
      Array.from({ length: 250 }, (_, i) => newEvent({ tenantId: TENANT, occurredAtMs: T0 + 1000 + i })),
    );
    await sealer.sealNow();
    const second = await publish('--directory', join(dir, 'copy'));
    expect(second.status).to.equal(0);
    // Tile 0/001 and its bundle completed, 0/002 partial, level 1 partial, the bundles' generation and the checkpoint.
    expect(second.stdout).to.match(/at 551 leaves .*\(7 files; it held 301\)/);
    const consistent = await runGoTlogClient({
      prefix: filesUrl,
      apiKey: 'none',
      vkey: await vkey(),
      leaves: [256, 550],
      oldCheckpointFile: join(dir, 'first.checkpoint'),
    });
    expect(consistent.stderr).to.equal('');
    expect(consistent.status).to.equal(0);
  });

  it('writes the entry bundles it held again after a redaction changed one, and only then', async () => {
    const bundle = () => decodeBundle(readFileSync(join(dir, 'copy', 'tile/entries/000')));
    const unchanged = await publish('--directory', join(dir, 'copy'));
    // The partial tiles of the same size, the generation and the checkpoint: no full bundle.
    expect(unchanged.stdout).to.match(/at 551 leaves .*\(5 files; it held 551\)/);
    const eventId = JSON.parse(bundle()[5]!.toString()).event_id as string;
    const database = new Database({ url: db.url, poolSize: 1, applicationName: 'static log test', log: testLogger() });
    try {
      await redactEvent(
        new EventWriter(database, WEBHOOK_FAN_OUT),
        { tenantId: TENANT, eventId, fields: ['details.note'], reference: 'DSR-7' },
        { userId: 'dpo', userRole: 'operator' },
      );
    } finally {
      await database.close();
    }
    const after = await publish('--directory', join(dir, 'copy'));
    expect(after.status).to.equal(0);
    // Both full bundles it held, then as before.
    expect(after.stdout).to.match(/at 551 leaves .*\(7 files; it held 551\)/);
    const redacted = JSON.parse(bundle()[5]!.toString());
    expect(redacted.event_id).to.equal(eventId);
    expect(redacted.redaction.history[0].reference).to.equal('DSR-7');
  });

  it('writes the same files to the archive bucket, full tiles immutable and the checkpoint short-lived', async () => {
    const result = await publish('--bucket', BUCKET, '--prefix', 'logs/static-a');
    expect(result.stderr).to.equal('');
    expect(result.status).to.equal(0);
    const s3 = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: S3_KEYS });
    try {
      const tile = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'logs/static-a/tile/0/000' }));
      expect(tile.CacheControl).to.equal('public, max-age=31536000, immutable');
      expect(Buffer.from(await tile.Body!.transformToByteArray()).equals(readFileSync(join(dir, 'copy', 'tile/0/000')))).to.equal(true);
      const checkpoint = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'logs/static-a/checkpoint' }));
      expect(checkpoint.CacheControl).to.equal('public, max-age=5');
      expect(await checkpoint.Body!.transformToString()).to.equal(readFileSync(join(dir, 'copy', 'checkpoint'), 'utf8'));
    } finally {
      s3.destroy();
    }
    expect((await publish('--directory', 'x', '--bucket', BUCKET)).status).to.equal(2);
  });
});
