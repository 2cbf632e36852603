import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canonicalJson } from '../../src/client/canonicalJson.ts';
import { hashLeaf } from '../../src/client/merkleHash.ts';
import { checkpointText, formatSignedNote, parseCheckpoint, parseSignedNote, signNoteText } from '../../src/client/signedNote.ts';
import { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { redactEvent } from '../../src/lifecycle/redactions.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { runGoTlogClient } from '../support/go-tlog-client.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, testLogger, type TestService } from '../support/service.ts';
import { decodeBundle } from '../support/entryBundles.ts';

const T0 = Date.parse('2026-11-28T10:00:00.000Z');
const TENANT = 'tlog-a';

/**
 * The trail as a C2SP transparency log, checked by the Go checksum database's own client code
 * (golang.org/x/mod/sumdb/note and sumdb/tlog, test/support/go/tlogclient.go): checkpoints in signed-note form,
 * tiles in tlog-tiles layout, entry bundles whose entries are the leaves.
 */
describe('the trail as a C2SP transparency log, verified by the Go checksum database client', function () {
  this.timeout(180_000);
  let db: TestDatabase;
  let api: TestService;
  let sealer: TestSealer;
  let database: Database;
  let key: string;
  let otherKey: string;
  let dir: string;
  let firstCheckpoint: string;
  const keys = sealKeyPair();
  const trail = Array.from({ length: 300 }, (_, i) =>
    newEvent({ tenantId: TENANT, occurredAtMs: T0 + i * 1000, resourceId: `r-${i}`, details: JSON.stringify({ visit: i, note: 'é "q"' }) }),
  );
  const later = Array.from({ length: 260 }, (_, i) => newEvent({ tenantId: TENANT, occurredAtMs: T0 + 400_000 + i }));
  const prefix = () => `${api.baseUrl}/audit/integrity`;
  const get = (path: string, apiKey = key) => call(`${prefix()}/${path}`, { key: apiKey });

  before(async () => {
    db = await createTestDatabase();
    database = new Database({ url: db.url, poolSize: 2, applicationName: 'tlog test', log: testLogger() });
    await seedEvents(db.url, [...trail, newEvent({ tenantId: 'tlog-b' })]);
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    key = (await mintKey(db.url, { tenantId: TENANT, scopes: ['audit:read'] })).key;
    otherKey = (await mintKey(db.url, { tenantId: 'tlog-b', scopes: ['audit:read'] })).key;
    sealer = await startTestSealer(db.url, keys.privateKey);
    await sealer.sealNow();
    dir = mkdtempSync(join(tmpdir(), 'audit-tlog-'));
  });

  after(async () => {
    await sealer?.close();
    await api?.stop();
    await database?.close();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const deploymentId = async () => (await db.pool.query('SELECT deployment_id FROM audit_deployment')).rows[0].deployment_id as string;
  const leafEvents = async () =>
    (await db.pool.query(`SELECT event_id::text FROM merkle_leaves WHERE tenant_id = $1 ORDER BY leaf_index`, [TENANT])).rows.map(
      (row: { event_id: string }) => row.event_id,
    );
  const vkey = async () => (await get('verifier-key')).text.trim();

  it('publishes a checkpoint naming the deployment and tenant, for the tree its JSON head signs', async () => {
    const response = await get('checkpoint');
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.equal('text/plain; charset=utf-8');
    expect(response.headers.get('cache-control')).to.equal('private, max-age=2');
    const note = parseSignedNote(response.text);
    const checkpoint = parseCheckpoint(note.text);
    expect(checkpoint.origin).to.equal(`audit-trail/${await deploymentId()}/${TENANT}`);
    const head = (await get('tree-head')).json;
    expect(checkpoint.size).to.equal(head.tree_size).and.equal(301);
    expect(checkpoint.rootHash.toString('hex')).to.equal(head.root_hash);
    // One signature, by the log's key under its origin; the vkey names the same key.
    expect(note.signatures.map((signature) => signature.name)).to.deep.equal([checkpoint.origin]);
    const verifierKey = await vkey();
    expect(verifierKey.split('+')[0]).to.equal(checkpoint.origin);
    expect(verifierKey.split('+')[1]).to.equal(note.signatures[0]!.keyId.toString('hex'));
    firstCheckpoint = join(dir, 'first.checkpoint');
    writeFileSync(firstCheckpoint, response.text);
    // Another tenant's key reads its own log, under its own name.
    const other = parseCheckpoint(parseSignedNote((await get('checkpoint', otherKey)).text).text);
    expect(other.origin).to.equal(`audit-trail/${await deploymentId()}/tlog-b`);
    expect(other.size).to.equal(2);
  });

  it("is verified by Go's note and tlog packages: the signature, and inclusion of chosen events from tiles and entry bundles", async () => {
    const leaves = [0, 1, 137, 255, 256, 300];
    const result = await runGoTlogClient({ prefix: prefix(), apiKey: key, vkey: await vkey(), leaves });
    expect(result.stderr).to.equal('');
    expect(result.status).to.equal(0);
    const output = JSON.parse(result.stdout);
    expect(output.checkpoint.size).to.equal(301);
    const events = await leafEvents();
    expect(output.leaves.map((leaf: { event_id: string }) => leaf.event_id)).to.deep.equal(leaves.map((leaf) => events[leaf]));
    // An entry is the event as the API serves it, canonical.
    const served = (await call(`${api.baseUrl}/audit/events/${events[137]}`, { key })).json;
    expect(output.leaves[2].entry).to.equal(canonicalJson(served));
  });

  it('serves tiles as tlog-tiles lays them out: full ones immutable, partial ones short-lived, none beyond the tree', async () => {
    const full = await get('tile/0/000');
    expect(full.status).to.equal(200);
    expect(full.headers.get('content-type')).to.equal('application/octet-stream');
    expect(full.headers.get('cache-control')).to.equal('private, max-age=31536000, immutable');
    const partial = await get('tile/0/001.p/45');
    expect(partial.status).to.equal(200);
    expect(partial.headers.get('cache-control')).to.equal('private, max-age=10');
    expect((await get('tile/1/000.p/1')).status).to.equal(200);
    for (const missing of [
      'tile/0/001',
      'tile/0/001.p/46',
      'tile/1/000',
      'tile/2/000.p/1',
      'tile/entries/002.p/1',
      'tile/0/1',
      'tile/0/x000/001',
    ]) {
      const response = await get(missing);
      expect(response.status, missing).to.equal(404);
      expect(response.json.error).to.equal('not_found');
    }
    // Another tenant's tree is smaller: tenant a's tiles are not reachable with its key.
    expect((await get('tile/0/000', otherKey)).status).to.equal(404);
    expect((await call(`${prefix()}/tile/0/000`)).status).to.equal(401);
  });

  it('proves a later checkpoint consistent with the earlier one, with Go', async () => {
    await seedEvents(db.url, later);
    await sealer.sealNow();
    const result = await runGoTlogClient({
      prefix: prefix(),
      apiKey: key,
      vkey: await vkey(),
      leaves: [300, 301, 560],
      oldCheckpointFile: firstCheckpoint,
    });
    expect(result.stderr).to.equal('');
    expect(result.status).to.equal(0);
    const output = JSON.parse(result.stdout);
    expect(output.checkpoint.size).to.equal(561);
    expect(output.consistent_with.size).to.equal(301);
  });

  it('keeps the hashes of a redacted event, and its entry says it was redacted', async () => {
    const events = await leafEvents();
    const writer = new EventWriter(database, WEBHOOK_FAN_OUT);
    await redactEvent(
      writer,
      { tenantId: TENANT, eventId: events[5]!, fields: ['details.note'], reference: 'DSR-9' },
      { userId: 'dpo', userRole: 'operator' },
    );
    await sealer.sealNow();
    const result = await runGoTlogClient({ prefix: prefix(), apiKey: key, vkey: await vkey(), leaves: [5] });
    // Go's CheckRecord refuses the entry: it is no longer the leaf's data. The tiles still verify, and the
    // entry names the leaf it was.
    expect(result.status).to.equal(1);
    expect(result.stderr).to.match(/leaf 5: its entry is not the leaf the tree holds/);
    const tile = (await get('tile/0/000')).text;
    expect(tile).to.not.equal(undefined);
    const bundle = Buffer.from(
      await (await fetch(`${prefix()}/tile/entries/000`, { headers: { authorization: `Bearer ${key}` } })).arrayBuffer(),
    );
    const entries = decodeBundle(bundle);
    expect(entries).to.have.length(256);
    const level0 = Buffer.from(
      await (await fetch(`${prefix()}/tile/0/000`, { headers: { authorization: `Bearer ${key}` } })).arrayBuffer(),
    );
    const redacted = JSON.parse(entries[5]!.toString());
    expect(redacted.redaction.leaf_hash).to.equal(level0.subarray(5 * 32, 6 * 32).toString('hex'));
    expect(hashLeaf(entries[4]!).equals(level0.subarray(4 * 32, 5 * 32))).to.equal(true);
  });

  it('rejects a tampered tile and a checkpoint signed by another key (Go, through a tampering proxy)', async () => {
    const forger = generateKeyPairSync('ed25519').privateKey;
    const proxy = await tamperingProxy(api.baseUrl, async (path, body) => {
      if (path.endsWith('/tile/0/000')) {
        // Leaf 2's hash: a sibling on leaf 3's path. (x/mod 0.7.0's TileHashReader does not authenticate a
        // full tile against its parent when the tree's own subtrees share tiles, so a hash no proof reads
        // would pass unnoticed by this client; the proof's hashes never do.)
        body[70] = body[70]! ^ 1;
        return body;
      }
      if (path.endsWith('/checkpoint') && forging) {
        const note = parseSignedNote(body.toString());
        const checkpoint = parseCheckpoint(note.text);
        const text = checkpointText({ ...checkpoint, rootHash: Buffer.alloc(32, 7) });
        return Buffer.from(formatSignedNote(text, [signNoteText(text, checkpoint.origin, forger)]));
      }
      return body;
    });
    let forging = false;
    try {
      const proxied = `${proxy.url}/audit/integrity`;
      const tampered = await runGoTlogClient({ prefix: proxied, apiKey: key, vkey: await vkey(), leaves: [3] });
      expect(tampered.status).to.equal(1);
      expect(tampered.stderr).to.match(/inclusion of leaf 3|invalid|hash/i);
      forging = true;
      const forged = await runGoTlogClient({ prefix: proxied, apiKey: key, vkey: await vkey() });
      expect(forged.status).to.equal(1);
      expect(forged.stderr).to.match(/checkpoint signature: .*(verifier|signature)/i);
    } finally {
      await proxy.close();
    }
  });
});

/** A real HTTP proxy on loopback in front of the API that may rewrite response bodies. */
async function tamperingProxy(
  target: string,
  rewrite: (path: string, body: Buffer) => Promise<Buffer>,
): Promise<{ url: string; close(): Promise<void> }> {
  const base = new URL(target);
  const server: Server = createServer(async (request, response) => {
    const upstream = await fetch(`${base.origin}${request.url}`, { headers: { authorization: request.headers.authorization ?? '' } });
    const body = await rewrite(request.url ?? '', Buffer.from(await upstream.arrayBuffer()));
    response.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/octet-stream' });
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${base.pathname}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
