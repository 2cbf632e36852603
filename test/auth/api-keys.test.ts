import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { ApiKeyVerifier } from '../../src/auth/apiKeyVerifier.ts';
import { Database } from '../../src/db/database.ts';
import { UnauthorizedError } from '../../src/platform/errors.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { ManualClock } from '../support/manual-clock.ts';
import { waitFor } from '../support/wait.ts';
import { TEST_PEPPER, call, mintKey, revokeKey, startTestService, testLogger, type TestService } from '../support/service.ts';

const run = promisify(execFile);

describe('API key authentication', () => {
  let db: TestDatabase;
  let api: TestService;
  let logLines: string[];

  const eventsUrl = () => `${api.baseUrl}/audit/events`;

  before(async () => {
    db = await createTestDatabase();
    logLines = [];
    const capture = new Writable({
      write(chunk, _encoding, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], log: createLogger('debug', capture) });
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  describe('401, one body for every cause', () => {
    let valid: { key: string; lookupId: string };
    let revoked: { key: string; lookupId: string };
    let stagingKey: { key: string };
    let boundElsewhere: { key: string };

    before(async () => {
      valid = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'] });
      revoked = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'] });
      stagingKey = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'] }, 'test');
      boundElsewhere = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'], allowedCidrs: ['10.0.0.0/8'] });
      await revokeKey(db.url, revoked.lookupId);
    });

    it('accepts the valid key (the control case)', async () => {
      expect((await call(eventsUrl(), { key: valid.key })).status).to.equal(200);
    });

    const causes: Array<[string, () => Record<string, string>]> = [
      ['no Authorization header', () => ({})],
      ['a Basic scheme', () => ({ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` })],
      ['an empty bearer token', () => ({ authorization: 'Bearer ' })],
      ['a token that is not a key', () => ({ authorization: 'Bearer hello' })],
      ['a key with a wrong secret', () => ({ authorization: `Bearer ${valid.key.slice(0, -4)}abcd` })],
      ['an unknown lookup id', () => ({ authorization: `Bearer atr_live_00000000_${'a'.repeat(32)}` })],
      ['uppercase hex', () => ({ authorization: `Bearer ${valid.key.toUpperCase()}` })],
      ['a revoked key', () => ({ authorization: `Bearer ${revoked.key}` })],
      ['a key of the test environment on a live deployment', () => ({ authorization: `Bearer ${stagingKey.key}` })],
      ['a live key relabelled as test', () => ({ authorization: `Bearer ${valid.key.replace('atr_live_', 'atr_test_')}` })],
      ['a request from outside the key allow-list', () => ({ authorization: `Bearer ${boundElsewhere.key}` })],
      ['two tokens', () => ({ authorization: `Bearer ${valid.key} ${valid.key}` })],
    ];
    for (const [cause, headers] of causes) {
      it(`answers 401 with the uniform body for ${cause}`, async () => {
        const response = await call(eventsUrl(), { headers: headers() });
        expect(response.status).to.equal(401);
        expect(response.text).to.equal('{"error":"unauthorized"}');
        expect(response.headers.get('www-authenticate')).to.equal('Bearer');
      });
    }

    it('accepts the scheme name in any case', async () => {
      expect((await call(eventsUrl(), { headers: { authorization: `bearer ${valid.key}` } })).status).to.equal(200);
    });

    it('never writes a key or its secret to the logs', async () => {
      const all = logLines.join('');
      expect(all).to.include('authentication failed');
      for (const key of [valid.key, revoked.key, stagingKey.key, boundElsewhere.key]) {
        expect(all).not.to.include(key);
        expect(all).not.to.include(key.slice(-32));
      }
      // The lookup id is what operators need to find the key, and is logged.
      expect(all).to.include(valid.lookupId);
    });
  });

  describe('403 per missing scope', () => {
    it('names the scope a key lacks for reading events', async () => {
      const exportOnly = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:export'] });
      const response = await call(eventsUrl(), { key: exportOnly.key });
      expect(response.status).to.equal(403);
      expect(response.json).to.deep.include({ error: 'forbidden', required_scope: 'audit:read' });
      const lookup = await call(`${eventsUrl()}/0190a0d5-0000-7000-8000-000000000000`, { key: exportOnly.key });
      expect(lookup.status).to.equal(403);
    });
  });

  describe('IP allow-lists', () => {
    it("admits a key bound to the caller's range", async () => {
      const bound = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'], allowedCidrs: ['127.0.0.0/8', '::1'] });
      expect((await call(eventsUrl(), { key: bound.key })).status).to.equal(200);
    });

    it('ignores X-Forwarded-For unless the peer is a trusted proxy', async () => {
      const bound = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'], allowedCidrs: ['203.0.113.0/24'] });
      const spoofed = await call(eventsUrl(), { key: bound.key, headers: { 'x-forwarded-for': '203.0.113.7' } });
      expect(spoofed.status).to.equal(401);

      const behindProxy = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { TRUSTED_PROXIES: '127.0.0.1/32,::1/128' } });
      try {
        const url = `${behindProxy.baseUrl}/audit/events`;
        expect((await call(url, { key: bound.key, headers: { 'x-forwarded-for': '203.0.113.7' } })).status).to.equal(200);
        // The client cannot prepend its own hop: the rightmost untrusted address counts.
        expect((await call(url, { key: bound.key, headers: { 'x-forwarded-for': '203.0.113.7, 198.51.100.1' } })).status).to.equal(401);
      } finally {
        await behindProxy.stop();
      }
    });
  });

  describe('revocation', () => {
    it('is seen by a second running instance within 5 seconds', async function () {
      this.timeout(20_000);
      const second = await startTestService({ databaseUrl: db.url, roles: ['api'] });
      try {
        const minted = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'] });
        const urls = [eventsUrl(), `${second.baseUrl}/audit/events`];
        // Both instances have verified (and cached) the key.
        for (const url of urls) expect((await call(url, { key: minted.key })).status).to.equal(200);

        const revokedAt = Date.now();
        await revokeKey(db.url, minted.lookupId);

        for (const url of urls) {
          const remainingMs = Math.max(0, 5_000 - (Date.now() - revokedAt));
          await waitFor(async () => (await call(url, { key: minted.key })).status === 401, `401 from ${url}`, remainingMs, 50);
        }
        expect(Date.now() - revokedAt).to.be.below(5_000);
      } finally {
        await second.stop();
      }
    });
  });

  describe('revocation without its notification', () => {
    let verifierDb: Database;
    before(() => {
      verifierDb = new Database({ url: db.url, poolSize: 1, applicationName: 'test verifier', log: testLogger() });
    });
    after(() => verifierDb?.close());

    it('is seen once the 4-second cache entry expires, by the cache lifetime alone', async () => {
      const clock = new ManualClock();
      // Never started: it hears no notifications, as when one is lost.
      const verifier = new ApiKeyVerifier({
        db: verifierDb,
        databaseUrl: db.url,
        pepper: TEST_PEPPER,
        environment: 'live',
        log: testLogger(),
        clock,
      });
      const minted = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read'] });
      const verify = () =>
        verifier.verify(`Bearer ${minted.key}`, '127.0.0.1').then(
          () => 'accepted',
          (error) => (error instanceof UnauthorizedError ? 'refused' : error),
        );
      expect(await verify()).to.equal('accepted');
      await revokeKey(db.url, minted.lookupId);
      expect(await verify(), 'still cached').to.equal('accepted');
      await clock.advance(3_999);
      expect(await verify(), 'still cached').to.equal('accepted');
      await clock.advance(1);
      expect(await verify()).to.equal('refused');
    });
  });

  describe('audit-trail keys (the operator CLI)', () => {
    const cli = (args: string[]) =>
      run(process.execPath, ['src/cli.ts', ...args], {
        env: { ...process.env, DATABASE_URL: db.url, KEY_PEPPER: TEST_PEPPER, LOG_LEVEL: 'silent', AUDIT_ACTOR: 'ops@example.org' },
      });

    it('mints a key that prints alone on stdout, lists it, revokes it, and records both in the trail', async function () {
      this.timeout(20_000);
      const minted = await cli([
        'keys',
        'mint',
        '--tenant',
        'cli-tenant',
        '--scopes',
        'audit:read,audit:export',
        '--description',
        'reporting',
      ]);
      const key = minted.stdout.trim();
      expect(key).to.match(/^atr_live_[0-9a-f]{8}_[0-9a-f]{32}$/);
      const lookupId = key.split('_')[2]!;

      const listed = JSON.parse((await cli(['keys', 'list', '--tenant', 'cli-tenant', '--json'])).stdout);
      expect(listed).to.have.length(1);
      expect(listed[0]).to.deep.include({ lookup_id: lookupId, tenant_id: 'cli-tenant', state: 'active', description: 'reporting' });
      expect(listed[0].scopes).to.deep.equal(['audit:export', 'audit:read']);
      expect(JSON.stringify(listed)).not.to.include(key.slice(-32));

      expect((await call(eventsUrl(), { key })).status).to.equal(200);
      await cli(['keys', 'revoke', lookupId]);

      const trail = await db.pool.query(
        `SELECT action, user_id, resource_id, details FROM event_fields WHERE tenant_id = 'cli-tenant' ORDER BY occurred_at`,
      );
      expect(trail.rows.map((row) => row.action)).to.deep.equal(['admin.key.create', 'admin.key.revoke']);
      expect(trail.rows.every((row) => row.user_id === 'ops@example.org' && row.resource_id === lookupId)).to.equal(true);
      expect(JSON.stringify(trail.rows)).not.to.include(key.slice(-32));
    });

    it('lists keys as a table with a header, its columns aligned whatever the length of a tenant or its scopes', async () => {
      for (const tenantId of ['t', 'a-tenant-with-a-rather-long-name']) {
        await mintKey(db.url, { tenantId, scopes: ['audit:read'], description: 'kept' });
      }
      await mintKey(db.url, { tenantId: 't', scopes: ['audit:read', 'audit:export', 'webhooks:write', 'portal:sessions'] });
      const lines = (await cli(['keys', 'list'])).stdout.trimEnd().split('\n');
      expect(lines[0]).to.match(/^LOOKUP_ID\s+STATE\s+TENANT\s+SCOPES\s+DESCRIPTION$/);
      const ours = lines.filter((line) => / (t|a-tenant-with-a-rather-long-name) /.test(line));
      expect(ours).to.have.length(3);
      // Every column starts where its title does, on every line.
      for (const title of ['STATE', 'TENANT', 'SCOPES']) {
        const at = lines[0]!.indexOf(title);
        for (const line of ours) expect(line.slice(at - 2, at), `${title} in "${line}"`).to.equal('  ');
        for (const line of ours) expect(line[at], `${title} in "${line}"`).to.match(/\S/);
      }
      expect(ours.filter((line) => line.endsWith(' kept'))).to.have.length(2);
    });

    it('refuses unknown scopes and bad CIDRs with a clear message and stores nothing', async () => {
      const failure = await cli(['keys', 'mint', '--tenant', 'cli-bad', '--scopes', 'audit:write', '--cidr', '10.0.0.0/33']).catch(
        (error: { code: number; stderr: string }) => error,
      );
      expect((failure as { code: number }).code).to.equal(1);
      expect((failure as { stderr: string }).stderr)
        .to.include('unknown scope "audit:write"')
        .and.to.include('10.0.0.0/33');
      const { rowCount } = await db.pool.query(`SELECT 1 FROM api_keys WHERE tenant_id = 'cli-bad'`);
      expect(rowCount).to.equal(0);
    });
  });
});
