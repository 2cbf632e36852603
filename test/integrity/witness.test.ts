import { expect } from 'chai';
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkpointText,
  cosignCheckpoint,
  formatSignedNote,
  openSignedNote,
  parseCheckpoint,
  parseSignedNote,
  parseVerifierKey,
  signNoteText,
} from '../../src/client/signedNote.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { cli } from '../support/customerCli.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { runGoTlogClient } from '../support/go-tlog-client.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

const T0 = Date.parse('2026-11-29T10:00:00.000Z');
const TENANT = 'witness-a';
const WITNESS = 'witness.customer.example/audit';

/**
 * Customers as witnesses (docs/integrity.md "Watching a log"): `audit-trail-client witness` keeps the last
 * checkpoint it verified, co-signs each consistent new one (tlog-cosignature/v1) and posts it back; the
 * service serves the checkpoint with it. A simulated fork (a checkpoint for a different tree of the same size,
 * signed by the log's own key, served through a proxy) is refused, with both checkpoints kept as evidence.
 */
describe('customers as witnesses of their log', function () {
  this.timeout(180_000);
  let db: TestDatabase;
  let api: TestService;
  let sealer: TestSealer;
  let key: string;
  let dir: string;
  const keys = sealKeyPair();
  const prefix = () => `${api.baseUrl}/audit/integrity`;
  const get = (path: string) => call(`${prefix()}/${path}`, { key });

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(
      db.url,
      Array.from({ length: 20 }, (_, i) => newEvent({ tenantId: TENANT, occurredAtMs: T0 + i })),
    );
    await seedEvents(db.url, [newEvent({ tenantId: 'witness-b' })]);
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    key = (await mintKey(db.url, { tenantId: TENANT, scopes: ['audit:read'] })).key;
    sealer = await startTestSealer(db.url, keys.privateKey);
    await sealer.sealNow();
    dir = mkdtempSync(join(tmpdir(), 'audit-witness-'));
  });

  after(async () => {
    await sealer?.close();
    await api?.stop();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const logKey = async () => (await get('verifier-key')).text.trim();
  const witness = (url: string) =>
    cli(
      [
        'witness',
        '--log-key',
        logKeyText,
        '--name',
        WITNESS,
        '--key',
        join(dir, 'witness.pem'),
        '--state',
        join(dir, 'state'),
        '--url',
        url,
      ],
      {
        AUDIT_TRAIL_API_KEY: key,
      },
    );
  let logKeyText: string;
  let witnessKey: string;

  it('makes a witness key and co-signs the first checkpoint it sees; the service serves the cosignature', async () => {
    const made = await cli(['witness', 'keygen', '--name', WITNESS, '--key', join(dir, 'witness.pem')]);
    expect(made.code).to.equal(0);
    witnessKey = made.stdout.trim();
    expect(parseVerifierKey(witnessKey).name).to.equal(WITNESS);
    logKeyText = await logKey();
    const run = await witness(api.baseUrl);
    expect(run.stderr).to.equal('');
    expect(run.code).to.equal(0);
    expect(run.stdout).to.match(/^cosigned audit-trail\/[a-z0-9]{12}\/witness-a at 21 leaves \(consistent with 0\)\n$/);
    const served = (await get('checkpoint')).text;
    const opened = openSignedNote(served, [parseVerifierKey(logKeyText), parseVerifierKey(witnessKey)]);
    expect(opened.verifiedBy.map((verifier) => verifier.name)).to.deep.equal([parseVerifierKey(logKeyText).name, WITNESS]);
    // A client that knows only the log's key (Go's note package) ignores the cosignature and verifies.
    const go = await runGoTlogClient({ prefix: prefix(), apiKey: key, vkey: logKeyText, leaves: [3] });
    expect(go.stderr).to.equal('');
    expect(go.status).to.equal(0);
  });

  it('co-signs a later checkpoint only after proving it consistent with the one it kept', async () => {
    await seedEvents(
      db.url,
      Array.from({ length: 15 }, (_, i) => newEvent({ tenantId: TENANT, occurredAtMs: T0 + 100 + i })),
    );
    await sealer.sealNow();
    const run = await witness(api.baseUrl);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.match(/at 36 leaves \(consistent with 21\)/);
    const kept = readFileSync(join(dir, 'state', readdirSync(join(dir, 'state')).find((name) => name.endsWith('.checkpoint'))!), 'utf8');
    expect(parseCheckpoint(parseSignedNote(kept).text).size).to.equal(36);
    expect(parseSignedNote((await get('checkpoint')).text).signatures).to.have.length(2);
  });

  it('refuses a checkpoint for a different tree of the same size (a fork), exits 1 and keeps both as evidence', async () => {
    const genuine = parseSignedNote((await get('checkpoint')).text);
    const checkpoint = parseCheckpoint(genuine.text);
    // The log's own key signs a second tree of 36 leaves: what a sealer without the fork guard would do.
    const forkedText = checkpointText({ ...checkpoint, rootHash: Buffer.alloc(32, 9) });
    const forked = formatSignedNote(forkedText, [signNoteText(forkedText, checkpoint.origin, keys.privateKey)]);
    const proxy = await rewritingProxy(api.baseUrl, (path, body) =>
      path.endsWith('/audit/integrity/checkpoint') ? Buffer.from(forked) : body,
    );
    try {
      const run = await witness(proxy.url);
      expect(run.code).to.equal(1);
      expect(run.stdout).to.equal('');
      expect(run.stderr).to.match(/refused to cosign .*witness-a: two different trees of 36 leaves: the log forked; evidence kept in /);
      const evidence = readdirSync(join(dir, 'state')).find((name) => name.startsWith('evidence-'))!;
      expect(readFileSync(join(dir, 'state', evidence, 'kept.checkpoint'), 'utf8')).to.include(genuine.text);
      expect(readFileSync(join(dir, 'state', evidence, 'offered.checkpoint'), 'utf8')).to.equal(forked);
    } finally {
      await proxy.close();
    }
    // Nothing was cosigned for the fork; the kept checkpoint is still the genuine one.
    const cosigned = await db.pool.query('SELECT root_hash FROM checkpoint_cosignatures WHERE tenant_id = $1', [TENANT]);
    expect(cosigned.rows.every((row: { root_hash: Buffer }) => !row.root_hash.equals(Buffer.alloc(32, 9)))).to.equal(true);
    expect((await witness(api.baseUrl)).code).to.equal(0);
  });

  it('refuses a checkpoint smaller than the one kept (a log that went back)', async () => {
    const genuine = parseCheckpoint(parseSignedNote((await get('checkpoint')).text).text);
    const smallerText = checkpointText({ ...genuine, size: 21 });
    const smaller = formatSignedNote(smallerText, [signNoteText(smallerText, genuine.origin, keys.privateKey)]);
    const proxy = await rewritingProxy(api.baseUrl, (path, body) =>
      path.endsWith('/audit/integrity/checkpoint') ? Buffer.from(smaller) : body,
    );
    try {
      const run = await witness(proxy.url);
      expect(run.code).to.equal(1);
      expect(run.stderr).to.match(/the log went back from 36 leaves to 21/);
    } finally {
      await proxy.close();
    }
  });

  it("accepts only cosignatures that verify, of this log's own checkpoints, for the caller's tenant", async () => {
    const note = (await get('checkpoint')).text;
    const parsed = parseSignedNote(note);
    const witnessPrivate = createPrivateKey(readFileSync(join(dir, 'witness.pem')));
    const cosignature = cosignCheckpoint(parsed.text, WITNESS, witnessPrivate, Math.floor(Date.now() / 1000));
    const post = (body: string, vkey = witnessKey, apiKey = key) =>
      call(`${prefix()}/cosignatures?witness_key=${encodeURIComponent(vkey)}`, {
        key: apiKey,
        body,
        headers: { 'content-type': 'text/plain; charset=utf-8' },
      });
    const logLine = parsed.signatures[0]!.line;
    const good = `old 0\n\n${formatSignedNote(parsed.text, [logLine, cosignature])}`;
    expect((await post(good)).status).to.equal(201);
    // A cosignature that does not verify: its last byte changed.
    const bytes = Buffer.from(cosignature.split(' ').at(-1)!, 'base64');
    bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 1;
    const tampered = `${cosignature.split(' ').slice(0, -1).join(' ')} ${bytes.toString('base64')}`;
    const refused = await post(`old 0\n\n${formatSignedNote(parsed.text, [logLine, tampered])}`);
    expect(refused.status).to.equal(422);
    expect(refused.json.error).to.equal('validation_failed');
    // A checkpoint the log never signed, cosigned: refused.
    const otherText = checkpointText({ ...parseCheckpoint(parsed.text), rootHash: Buffer.alloc(32, 3) });
    const unsigned = `old 0\n\n${formatSignedNote(otherText, [logLine, cosignCheckpoint(otherText, WITNESS, witnessPrivate, 1)])}`;
    expect((await post(unsigned)).status).to.equal(422);
    // Another tenant's key cannot post for this tenant's log.
    const otherKey = (await mintKey(db.url, { tenantId: 'witness-b', scopes: ['audit:read'] })).key;
    await sealer.sealNow();
    expect((await post(good, witnessKey, otherKey)).status).to.equal(404);
    // Proof lines are hashes: one of that shape passes (the log needs no proof of its own tree), anything else
    // is refused, naming the line.
    const signedNote = formatSignedNote(parsed.text, [logLine, cosignature]);
    expect((await post(`old 1\n${Buffer.alloc(32, 7).toString('base64')}\n\n${signedNote}`)).status).to.equal(201);
    const badProof = await post(`old 1\n${Buffer.alloc(32, 7).toString('base64')}\nnot a hash\n\n${signedNote}`);
    expect(badProof.status).to.equal(422);
    expect(JSON.stringify(badProof.json)).to.contain('proof line 2 is not a base64 SHA-256 hash');
    // Not an add-checkpoint body, or not text.
    expect((await post('hello')).status).to.equal(422);
    const json = await call(`${prefix()}/cosignatures?witness_key=${encodeURIComponent(witnessKey)}`, { key, body: { a: 1 } });
    expect(json.status).to.equal(415);
    const count = await db.pool.query('SELECT count(*)::int AS n FROM checkpoint_cosignatures WHERE tenant_id = $1', [TENANT]);
    expect(count.rows[0].n).to.equal(2);
  });
});

/** A real HTTP proxy on loopback in front of the API that may replace response bodies. */
async function rewritingProxy(
  target: string,
  rewrite: (path: string, body: Buffer) => Buffer,
): Promise<{ url: string; close(): Promise<void> }> {
  const base = new URL(target);
  const server: Server = createServer(async (request, response) => {
    const upstream = await fetch(`${base.origin}${request.url}`, { headers: { authorization: request.headers.authorization ?? '' } });
    const body = rewrite(request.url ?? '', Buffer.from(await upstream.arrayBuffer()));
    response.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/octet-stream' });
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
