import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TreeHeadSigner } from '../../src/integrity/treeHeadSigner.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

const T0 = Date.parse('2026-10-07T10:00:00.000Z');
const WINDOW = { until: '2026-10-08T00:00:00Z' };

/**
 * Tampering as a superuser would do it: with the append-only triggers off (session_replication_role), the
 * stored trail is changed behind the service's back. The offline verifier (the CLI, as a customer runs it)
 * and `audit-trail integrity check` must each notice, and name the event concerned.
 */
describe('tamper evidence: what a superuser changes is detected and named', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let api: TestService;
  let sealer: TestSealer;
  let dir: string;
  const keys = sealKeyPair();
  const apiKeys = new Map<string, string>();
  const tenants = ['tamper-doc', 'tamper-legacy', 'tamper-col', 'tamper-delete', 'tamper-swap', 'tamper-fork', 'tamper-none'];
  const trail = (tenant: string) =>
    Array.from({ length: 40 }, (_, i) => newEvent({ tenantId: tenant, occurredAtMs: T0 + i * 1000, resourceId: `${tenant}-${i}` }));
  const events = new Map(tenants.map((tenant) => [tenant, trail(tenant)]));
  const legacyId = '00000000-0000-4000-8000-00000000abcd';

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, [...events.values()].flat());
    // A row stored before events kept their document (migration 005): served from its columns.
    await db.pool.query(
      `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, phi_involved, success)
       VALUES ('tamper-legacy', $1, $2, 'phi.read', 'legacy-user', 'clinician', 'claim', 'c-1', true, true)`,
      [new Date(T0 + 500).toISOString(), legacyId],
    );
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    for (const tenant of tenants)
      apiKeys.set(tenant, (await mintKey(db.url, { tenantId: tenant, scopes: ['audit:read', 'audit:export'] })).key);
    sealer = await startTestSealer(db.url, keys.privateKey);
    await sealer.sealNow();
    dir = mkdtempSync(join(tmpdir(), 'audit-tamper-'));
    writeFileSync(join(dir, 'public.pem'), keys.publicPem);
  });

  after(async () => {
    await sealer?.close();
    await api?.stop();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function tamper(sql: string, values: unknown[] = []): Promise<void> {
    const client = await db.pool.connect();
    try {
      await client.query('SET session_replication_role = replica');
      await client.query(sql, values);
    } finally {
      await client.query('RESET session_replication_role');
      client.release();
    }
  }

  /** Saves what a customer keeps: the current head, and an export with proofs. */
  async function save(tenant: string, name: string, body: object = WINDOW): Promise<{ head: string; export: string }> {
    const key = apiKeys.get(tenant)!;
    const head = await call(`${api.baseUrl}/audit/integrity/tree-head`, { key });
    const exported = await call(`${api.baseUrl}/audit/export?format=ndjson&proofs=true`, { key, body });
    expect(exported.status).to.equal(200);
    const paths = { head: join(dir, `${name}-head.json`), export: join(dir, `${name}.ndjson`) };
    writeFileSync(paths.head, head.text);
    writeFileSync(paths.export, exported.text);
    return paths;
  }

  function verify(...args: string[]): { status: number | null; stdout: string; stderr: string } {
    const result = spawnSync(process.execPath, ['src/cli.ts', 'verify', '--public-key', join(dir, 'public.pem'), ...args], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH },
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  function integrityCheck(tenant: string): { status: number | null; stdout: string } {
    const result = spawnSync(process.execPath, ['src/cli.ts', 'integrity', 'check', '--tenant', tenant], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH, DATABASE_URL: db.url, LOG_LEVEL: 'silent' },
    });
    return { status: result.status, stdout: result.stdout + result.stderr };
  }

  const failingEvents = (stderr: string) => [...new Set([...stderr.matchAll(/event ([0-9a-f-]{36}):/g)].map((match) => match[1]))].sort();

  it('passes both checks on a trail nobody touched', () => {
    return (async () => {
      const saved = await save('tamper-none', 'none');
      const offline = verify('--export', saved.export, '--tree-head', saved.head);
      expect(offline.stderr).to.equal('');
      expect(offline.stdout).to.match(/^verified: 40 events, 40 proven against the tree head of size 41/);
      expect(offline.status).to.equal(0);
      const check = integrityCheck('tamper-none');
      expect(check.stdout).to.contain('tenant tamper-none: 41 leaves, 1 tree heads: ok');
      expect(check.status).to.equal(0);
    })();
  });

  it('names the event whose stored values were changed', async () => {
    const target = events.get('tamper-doc')![17]!;
    // The user changed in the values only (the second): the served document changes, the user_id column does not.
    await tamper(
      `UPDATE events SET document_values = (
         SELECT string_agg(CASE WHEN v.position = 2 THEN '"someone-else"' ELSE v.text END, E'\\x1f' ORDER BY v.position)
           FROM unnest(string_to_array(document_values, E'\\x1f')) WITH ORDINALITY AS v(text, position))
        WHERE event_id = $1`,
      [target.eventId],
    );
    const offline = verify('--export', (await save('tamper-doc', 'doc')).export);
    expect(offline.status).to.equal(1);
    expect(failingEvents(offline.stderr)).to.deep.equal([target.eventId]);
    const check = integrityCheck('tamper-doc');
    expect(check.status).to.equal(1);
    expect(check.stdout).to.contain(`leaf_mismatch: event ${target.eventId}`);
    expect(check.stdout).to.contain(`columns_mismatch: event ${target.eventId}`);
    expect(check.stdout.match(/: event [0-9a-f-]{36}/g)!.every((hit) => hit.endsWith(target.eventId))).to.equal(true);
  });

  it('names the event whose column was changed, when the event is served from its columns', async () => {
    await tamper(`UPDATE events SET user_id = 'someone-else' WHERE event_id = $1`, [legacyId]);
    const offline = verify('--export', (await save('tamper-legacy', 'legacy')).export);
    expect(offline.status).to.equal(1);
    expect(failingEvents(offline.stderr)).to.deep.equal([legacyId]);
    const check = integrityCheck('tamper-legacy');
    expect(check.status).to.equal(1);
    expect(check.stdout).to.contain(`leaf_mismatch: event ${legacyId}`);
  });

  it('names the event whose column no longer matches the document it is served from (integrity check)', async () => {
    const target = events.get('tamper-col')![3]!;
    // The user is in both the column (for the user_id filter) and the values the event is served from.
    await tamper(`UPDATE events SET user_id = 'someone-else' WHERE event_id = $1`, [target.eventId]);
    const check = integrityCheck('tamper-col');
    expect(check.status).to.equal(1);
    expect(check.stdout).to.contain(`columns_mismatch: event ${target.eventId}`);
    expect(check.stdout).not.to.contain('leaf_mismatch');
  });

  it('detects a deleted row: the check names it, and a complete export lacks its leaf', async () => {
    const target = events.get('tamper-delete')![25]!;
    await tamper('DELETE FROM events WHERE event_id = $1', [target.eventId]);
    const check = integrityCheck('tamper-delete');
    expect(check.status).to.equal(1);
    expect(check.stdout).to.contain(`event_missing: event ${target.eventId}`);
    // The whole trail, as the tenant's own export with no filters gives it (the admin event of its key included).
    const saved = await save('tamper-delete', 'delete', {});
    const offline = verify('--export', saved.export, '--complete');
    expect(offline.status).to.equal(1);
    expect(offline.stderr).to.match(/lacks the events of leaves \d+ of the tree head of size 41/);
  });

  it('names both events when two swap positions in the tree', async () => {
    const [a, b] = [events.get('tamper-swap')![5]!, events.get('tamper-swap')![30]!];
    // Their keys trade places in the record of which event each leaf is.
    await tamper(
      `UPDATE merkle_leaf_ranges SET
         event_ids = array_replace(array_replace(array_replace(event_ids, $1::uuid, '00000000-0000-0000-0000-000000000000'), $2::uuid, $1::uuid), '00000000-0000-0000-0000-000000000000', $2::uuid),
         event_occurred_at = (SELECT array_agg(CASE WHEN id = $1::uuid THEN (SELECT occurred_at FROM events WHERE event_id = $2::uuid)
                                                    WHEN id = $2::uuid THEN (SELECT occurred_at FROM events WHERE event_id = $1::uuid) ELSE at END ORDER BY n)
                                FROM unnest(event_ids, event_occurred_at) WITH ORDINALITY AS x(id, at, n))
       WHERE tenant_id = 'tamper-swap'`,
      [a.eventId, b.eventId],
    );
    const offline = verify('--export', (await save('tamper-swap', 'swap')).export);
    expect(offline.status).to.equal(1);
    expect(failingEvents(offline.stderr)).to.deep.equal([a.eventId, b.eventId].sort());
    const check = integrityCheck('tamper-swap');
    expect(check.status).to.equal(1);
    expect(check.stdout).to.contain(`leaf_mismatch: event ${a.eventId}`);
    expect(check.stdout).to.contain(`leaf_mismatch: event ${b.eventId}`);
  });

  it('detects a second, different head signed for a size the customer kept a head of', async () => {
    const kept = await save('tamper-fork', 'fork-before');
    const original = JSON.parse((await call(`${api.baseUrl}/audit/integrity/tree-head`, { key: apiKeys.get('tamper-fork')! })).text);
    // History rewritten and signed again with the real key: a new root for the same size.
    const forged = new TreeHeadSigner(keys.privateKey).sign({
      tenant_id: 'tamper-fork',
      tree_size: original.tree_size,
      root_hash: 'ab'.repeat(32),
      timestamp: new Date(Date.parse(original.timestamp) + 1000).toISOString(),
    });
    await tamper(`INSERT INTO tree_heads (tenant_id, signed_at, tree_size, root_hash, key_id, signature) VALUES ($1, $2, $3, $4, $5, $6)`, [
      forged.tenant_id,
      forged.timestamp,
      forged.tree_size,
      Buffer.from(forged.root_hash, 'hex'),
      forged.key_id,
      Buffer.from(forged.signature, 'base64'),
    ]);
    const later = await save('tamper-fork', 'fork-after');
    const offline = verify('--export', later.export, '--tree-head', kept.head);
    expect(offline.status).to.equal(1);
    expect(offline.stderr).to.contain(`two different tree heads for size ${original.tree_size}`);
    const check = integrityCheck('tamper-fork');
    expect(check.status).to.equal(1);
    expect(check.stdout).to.contain(`head_conflict: two different tree heads for size ${original.tree_size}`);
  });
});
