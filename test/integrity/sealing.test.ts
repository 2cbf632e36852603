import { expect } from 'chai';
import { createRequire } from 'node:module';
import {
  eventFromExportLine,
  eventLeafHash,
  keyIdOf,
  verifyConsistency,
  verifyInclusion,
  verifyTreeHead,
  type SignedTreeHead,
} from '../../src/client/integrity.ts';
import { EVENT_DOCUMENT } from '../../src/events/eventStore.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { auditPath, consistencyProof, merkleTreeHash } from '../support/rfc9162.ts';
import { waitFor } from '../support/wait.ts';
import canonicalize from 'canonicalize';

const { verifyMerkleInclusion } = createRequire(import.meta.url)('@sigstore/verify/dist/tlog/merkle.js') as {
  verifyMerkleInclusion(entry: unknown, checkpoint: unknown): void;
};
const jcs = canonicalize as unknown as (value: unknown) => string;

const T0 = Date.parse('2026-10-05T08:00:00.000Z');

describe('sealing: Merkle leaves, signed tree heads and proofs through the API', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let api: TestService;
  let sealer: TestSealer;
  let key: string;
  const keys = sealKeyPair();
  const first = Array.from({ length: 300 }, (_, i) =>
    newEvent({ tenantId: 'seal-a', occurredAtMs: T0 + i * 1000, resourceId: `r-${i}`, userAgent: `agent é ${i}\t"quoted"` }),
  );
  const second = Array.from({ length: 5 }, (_, i) => newEvent({ tenantId: 'seal-a', occurredAtMs: T0 + 400_000 + i }));
  const url = (path: string) => `${api.baseUrl}${path}`;
  const get = (path: string) => call(url(path), { key });

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, [...first, newEvent({ tenantId: 'seal-b' })]);
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { SEAL_INTERVAL: '7s' } });
    key = (await mintKey(db.url, { tenantId: 'seal-a', scopes: ['audit:read', 'audit:export'] })).key;
    sealer = await startTestSealer(db.url, keys.privateKey);
  });

  after(async () => {
    await sealer?.close();
    await api?.stop();
    await db?.drop();
  });

  /** The tenant's leaves in order, from the served documents, by the RFC's definitions (not ours). */
  async function servedLeaves(): Promise<Buffer[]> {
    const { rows } = await db.pool.query(
      `SELECT ${EVENT_DOCUMENT} AS document FROM merkle_leaves l
         JOIN events e ON e.tenant_id = l.tenant_id AND e.event_id = l.event_id AND e.occurred_at = l.event_occurred_at
        WHERE l.tenant_id = 'seal-a' ORDER BY l.leaf_index`,
    );
    return rows.map((row: { document: string }) => Buffer.from(jcs(JSON.parse(row.document))));
  }

  it('answers 404 for the tree head and 409 not_yet_sealed with Retry-After for a proof before sealing', async () => {
    const head = await get('/audit/integrity/tree-head');
    expect(head.status).to.equal(404);
    expect(head.json.error).to.equal('not_found');
    const proof = await get(`/audit/events/${first[0]!.eventId}/proof`);
    expect(proof.status).to.equal(409);
    expect(proof.json.error).to.equal('not_yet_sealed');
    expect(proof.headers.get('retry-after')).to.equal('7');
    expect((await get('/audit/events/00000000-0000-4000-8000-000000000000/proof')).status).to.equal(404);
  });

  it('seals every committed event once and signs a head that verifies under the published key', async () => {
    const pass = await sealer.sealNow();
    // The tenant's events and the admin event of minting its key.
    expect(pass.sealed).to.equal(first.length + 1 + 1);
    const { rows } = await db.pool.query(`SELECT count(*)::int AS queued FROM seal_queue`);
    expect(rows[0].queued).to.equal(0);
    const head = await get('/audit/integrity/tree-head');
    expect(head.status).to.equal(200);
    expect(Object.keys(head.json).sort()).to.deep.equal(['key_id', 'root_hash', 'signature', 'tenant_id', 'timestamp', 'tree_size']);
    expect(head.json.tree_size).to.equal(first.length + 1);
    expect(head.json.timestamp).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(head.json.key_id).to.equal(keyIdOf(keys.publicPem));
    const published = await get('/audit/integrity/keys');
    expect(published.json.keys).to.have.length(1);
    expect(published.json.keys[0]).to.include({
      key_id: sealer.keyId,
      algorithm: 'Ed25519',
      public_key_pem: keys.publicPem,
      valid_until: null,
    });
    expect(verifyTreeHead(head.json, published.json.keys)).to.deep.equal({ valid: true });
    expect(verifyTreeHead({ ...head.json, tree_size: head.json.tree_size + 1 }, published.json.keys).valid).to.equal(false);
    expect(head.json.root_hash).to.equal(merkleTreeHash(await servedLeaves()).toString('hex'));
    // Nothing new: a second pass signs nothing.
    expect(await sealer.sealNow()).to.deep.equal({ sealed: 0, heads: 0, busy: 0 });
  });

  it('proves each event against the latest head and against an older one, as RFC 9162 and sigstore check it', async () => {
    const firstHead = (await get('/audit/integrity/tree-head')).json as SignedTreeHead;
    await seedEvents(db.url, second);
    await sealer.sealNow();
    const latest = (await get('/audit/integrity/tree-head')).json as SignedTreeHead;
    expect(latest.tree_size).to.equal(firstHead.tree_size + second.length);
    const leaves = await servedLeaves();
    for (const event of [first[0]!, first[137]!, first[299]!, second[4]!]) {
      const served = (await get(`/audit/events/${event.eventId}`)).json;
      const proof = (await get(`/audit/events/${event.eventId}/proof`)).json;
      expect(Object.keys(proof).sort()).to.deep.equal(['audit_path', 'leaf_hash', 'leaf_index', 'tree_size']);
      expect(proof.tree_size).to.equal(latest.tree_size);
      expect(proof.leaf_hash).to.equal(eventLeafHash(served));
      expect(verifyInclusion(eventLeafHash(served), proof, latest)).to.deep.equal({ valid: true });
      expect(proof.audit_path).to.deep.equal(auditPath(proof.leaf_index, leaves).map((hash) => hash.toString('hex')));
      verifyMerkleInclusion(
        {
          canonicalizedBody: Buffer.from(jcs(served)),
          inclusionProof: { logIndex: String(proof.leaf_index), hashes: proof.audit_path.map((h: string) => Buffer.from(h, 'hex')) },
        },
        { logSize: BigInt(latest.tree_size), logHash: Buffer.from(latest.root_hash, 'hex') },
      );
    }
    const old = await get(`/audit/events/${first[10]!.eventId}/proof?tree_size=${firstHead.tree_size}`);
    expect(old.status).to.equal(200);
    expect(verifyInclusion(old.json.leaf_hash, old.json, firstHead)).to.deep.equal({ valid: true });
    const tooOld = await get(`/audit/events/${second[0]!.eventId}/proof?tree_size=${firstHead.tree_size}`);
    expect(tooOld.status).to.equal(422);
    expect((await get(`/audit/events/${first[0]!.eventId}/proof?tree_size=3`)).status).to.equal(404);
    expect((await get(`/audit/events/${first[0]!.eventId}/proof?tree_size=0`)).status).to.equal(422);
    expect((await get(`/audit/events/${first[0]!.eventId}/proof?size=3`)).status).to.equal(422);

    const consistency = await get(`/audit/integrity/consistency?first=${firstHead.tree_size}&second=${latest.tree_size}`);
    expect(consistency.status).to.equal(200);
    expect(consistency.json.proof).to.deep.equal(consistencyProof(firstHead.tree_size, leaves).map((hash) => hash.toString('hex')));
    expect(verifyConsistency(consistency.json, firstHead, latest)).to.deep.equal({ valid: true });
    expect((await get(`/audit/integrity/consistency?first=${latest.tree_size}&second=${firstHead.tree_size}`)).status).to.equal(422);
    expect((await get(`/audit/integrity/consistency?first=2&second=${latest.tree_size}`)).status).to.equal(404);
  });

  it('lists the head history newest first, by pages and time window', async () => {
    const all = (await get('/audit/integrity/tree-heads')).json;
    expect(all.tree_heads.map((head: SignedTreeHead) => head.tree_size)).to.deep.equal([
      first.length + 1 + second.length,
      first.length + 1,
    ]);
    const page1 = (await get('/audit/integrity/tree-heads?limit=1')).json;
    expect(page1.page).to.include({ limit: 1, returned: 1, has_more: true });
    const page2 = (await get(`/audit/integrity/tree-heads?limit=1&cursor=${page1.page.next_cursor}`)).json;
    expect(page2.tree_heads).to.deep.equal([all.tree_heads[1]]);
    expect(page2.page.has_more).to.equal(false);
    const later = (await get(`/audit/integrity/tree-heads?since=${encodeURIComponent(all.tree_heads[0].timestamp)}`)).json;
    expect(later.tree_heads).to.deep.equal([all.tree_heads[0]]);
    expect((await get(`/audit/integrity/tree-heads?limit=1&since=2020-01-01T00:00:00Z&cursor=${page1.page.next_cursor}`)).status).to.equal(
      422,
    );
  });

  it('exports events with their proofs against one head, verifiable line by line, and a plain export is unchanged', async () => {
    const window = { until: '2026-10-06T00:00:00Z' };
    const late = newEvent({ tenantId: 'seal-a', occurredAtMs: T0 + 500_000 });
    await seedEvents(db.url, [late]);
    const plain = await call(url('/audit/export?format=ndjson'), { key, body: window });
    const proven = await call(url('/audit/export?format=ndjson&proofs=true'), { key, body: window });
    expect(proven.status).to.equal(200);
    const plainLines = plain.text.trimEnd().split('\n');
    const lines = proven.text.trimEnd().split('\n');
    expect(lines).to.have.length(plainLines.length);
    for (const [index, line] of lines.entries()) {
      const { event, proof, treeHead } = eventFromExportLine(line);
      expect(event).to.deep.equal(JSON.parse(plainLines[index]!));
      expect(verifyTreeHead(treeHead!, [{ public_key_pem: keys.publicPem }])).to.deep.equal({ valid: true });
      if (proof === null) continue;
      expect(verifyInclusion(eventLeafHash(event), proof!, treeHead!), `line ${index}`).to.deep.equal({ valid: true });
    }
    // Committed after the last sealing: exported without a proof.
    const unsealed = lines.map((line) => eventFromExportLine(line)).filter((line) => line.proof === null);
    expect(unsealed.map((line) => line.event.event_id)).to.deep.equal([late.eventId]);

    const asJson = await call(url('/audit/export?proofs=true'), { key, body: window });
    expect(asJson.json.tree_head.tree_size).to.be.a('number');
    expect(asJson.json.count).to.equal(asJson.json.events.length);
    for (const element of asJson.json.events) {
      const { event, proof } = eventFromExportLine(element);
      if (proof) expect(verifyInclusion(eventLeafHash(event), proof, asJson.json.tree_head)).to.deep.equal({ valid: true });
    }
    expect((await call(url('/audit/export?proofs=yes'), { key, body: {} })).status).to.equal(422);
  });

  it('signs a heartbeat head for a tenant whose latest head is older than SEAL_HEARTBEAT', async () => {
    const heartbeat = await startTestSealer(db.url, keys.privateKey, { heartbeatMs: 1000 });
    try {
      const before = (await get('/audit/integrity/tree-head')).json as SignedTreeHead;
      // The late event and the audit.export events of the test before wait: they are sealed at once.
      expect((await heartbeat.sealNow()).sealed).to.equal(1 + 3);
      const after = (await get('/audit/integrity/tree-head')).json as SignedTreeHead;
      expect(Date.parse(after.timestamp)).to.be.greaterThan(Date.parse(before.timestamp));
      expect(after.tree_size).to.equal(before.tree_size + 1 + 3);
      expect(verifyTreeHead(after, [{ public_key_pem: keys.publicPem }])).to.deep.equal({ valid: true });
      // Nothing waits now: passes sign nothing for this tenant until that head is a heartbeat (1 s) old.
      const latest = async () => {
        await heartbeat.sealNow();
        return (await get('/audit/integrity/tree-head')).json as SignedTreeHead;
      };
      let beat = after;
      await waitFor(
        async () => {
          beat = await latest();
          return beat.timestamp !== after.timestamp;
        },
        'a heartbeat head',
        10_000,
        100,
      );
      expect(beat.tree_size).to.equal(after.tree_size);
      expect(beat.root_hash).to.equal(after.root_hash);
      expect(Date.parse(beat.timestamp) - Date.parse(after.timestamp), 'never before SEAL_HEARTBEAT').to.be.at.least(1000);
    } finally {
      await heartbeat.close();
    }
  });
});
