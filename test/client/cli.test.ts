import { expect } from 'chai';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { COMMAND_USAGE, CLIENT_VERSION } from '../../src/client/cli/usage.ts';
import { verifyWebhookSignature } from '../../src/client/webhookSignature.ts';
import { cli } from '../support/customerCli.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer } from '../support/integrity.ts';
import { freePort } from '../support/ports.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/** Child processes start slowly on a loaded machine: waits on them are long, and end as soon as their condition holds. */
const PATIENCE = 30_000;

const STACK_FRAME = /^\s+at .+[:(]/m;

const ndjson = (text: string): any[] =>
  text
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line));

describe('audit-trail-client without a service', function () {
  this.timeout(60_000);

  for (const command of Object.keys(COMMAND_USAGE)) {
    it(`prints the usage of ${command} for --help with no configuration at all, and exits 0`, async () => {
      const result = await cli([command, '--help']);
      expect(result.code, result.stderr).to.equal(0);
      expect(result.stderr).to.equal('');
      for (const line of COMMAND_USAGE[command]!) expect(result.stdout).to.include(line);
    });
  }

  it('prints every command for --help and help, and the package version for --version', async () => {
    const help = await cli(['--help']);
    expect(help.code).to.equal(0);
    for (const line of Object.values(COMMAND_USAGE).flat()) expect(help.stdout).to.include(line);
    expect((await cli(['help', 'webhooks'])).stdout).to.include(COMMAND_USAGE.webhooks![0]);
    const manifest = JSON.parse(await readFile('packages/client/package.json', 'utf8'));
    expect(CLIENT_VERSION).to.equal(manifest.version);
    expect((await cli(['--version'])).stdout).to.equal(`${manifest.version}\n`);
    expect(manifest.bin).to.deep.equal({ 'audit-trail-client': 'dist/cli/main.js' });
  });

  it('refuses a missing address, a missing key and a malformed key in one line with exit 2, never echoing the key', async () => {
    const url = 'http://127.0.0.1:9';
    const noUrl = await cli(['events', 'list'], { AUDIT_TRAIL_API_KEY: `atr_live_${'a'.repeat(8)}_${'b'.repeat(32)}` });
    expect(noUrl).to.include({ code: 2 });
    expect(noUrl.stderr).to.match(/^audit-trail-client: no service address: set AUDIT_TRAIL_URL or pass --url.*\n$/);
    const noKey = await cli(['events', 'list', '--url', url]);
    expect(noKey).to.include({ code: 2 });
    expect(noKey.stderr).to.match(/^audit-trail-client: no API key: set AUDIT_TRAIL_API_KEY.*\n$/);
    const malformed = 'atr_live_not-a-key-but-a-secret-value';
    const bad = await cli(['events', 'list', '--url', url], { AUDIT_TRAIL_API_KEY: malformed });
    expect(bad).to.include({ code: 2, stdout: '' });
    expect(bad.stderr).to.match(/^audit-trail-client: AUDIT_TRAIL_API_KEY is not an API key.*\n$/);
    expect(bad.stderr).not.to.include('secret-value');
  });

  it('names a bad option or value in one line without a stack, and exits 2', async () => {
    const env = { AUDIT_TRAIL_URL: 'http://127.0.0.1:9', AUDIT_TRAIL_API_KEY: `atr_live_${'a'.repeat(8)}_${'b'.repeat(32)}` };
    const cases: Array<[string[], RegExp]> = [
      [['events', 'list', '--bogus'], /Unknown option '--bogus'/],
      [['events', 'list', '--phi', 'yes'], /--phi takes true or false/],
      [['events', 'list', '--limit', '0'], /--limit takes a positive whole number/],
      [['events', 'list', '--all', '--cursor', 'c'], /--cursor and --all cannot be combined/],
      [['events', 'list', '--output', 'xml'], /--output takes table, json, ndjson/],
      [['webhooks', 'retry', 'wh_1'], /missing DELIVERY_ID/],
      [['webhooks', 'test', 'wh_1', '--overlap', '5'], /webhooks test does not take --overlap/],
      [['webhooks', 'replay', 'wh_1', '--since', '2026-11-01T00:00:00Z'], /needs --since and --until/],
      [['webhooks', 'update', 'wh_1'], /webhooks update needs at least one setting to change/],
      [['webhooks', 'update', 'wh_1', '--ordered', '--unordered'], /--ordered and --unordered cannot be combined/],
      [['webhooks', 'update', 'wh_1', '--timeout', 'soon'], /--timeout takes a positive whole number/],
      [['webhooks', 'update', 'wh_1', '--header', 'no-colon'], /--header takes 'Name: value'/],
      [['webhooks', 'update', 'wh_1', '--payload-filter', '{not json'], /--payload-filter takes JSON, @FILE holding JSON, or none/],
      [['webhooks', 'enable', 'wh_1', '--timeout', '5'], /webhooks enable does not take --timeout/],
      [['nope'], /unknown command "nope"/],
    ];
    for (const [args, message] of cases) {
      const result = await cli(args, env);
      expect(result.code, args.join(' ')).to.equal(2);
      expect(result.stderr, args.join(' ')).to.match(message);
      expect(result.stderr.split('\n')).to.have.length(2);
      expect(result.stderr).not.to.match(STACK_FRAME);
    }
  });

  it('says in one line, with exit 1, that the service cannot be reached, naming the address it tried', async () => {
    const origin = `http://127.0.0.1:${await freePort()}`;
    const result = await cli(['events', 'list', '--url', origin], { AUDIT_TRAIL_API_KEY: `atr_live_${'a'.repeat(8)}_${'b'.repeat(32)}` });
    expect(result).to.include({ code: 1, stdout: '' });
    expect(result.stderr).to.equal(`audit-trail-client: cannot reach the service at ${origin}/api/v2/public: ECONNREFUSED\n`);
  });
});

describe('audit-trail-client events and webhooks against the real service', function () {
  this.timeout(90_000);
  const T0 = Date.parse('2026-10-01T00:00:00.000Z');
  let db: TestDatabase;
  let service: TestService;
  let env: Record<string, string>;
  let key: string;
  const receivers: TestReceiver[] = [];

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'relay', 'worker'],
      // One retry an hour later: a failed delivery stays pending, so only the CLI's retry brings its next attempt.
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_SCHEDULE: '1h', DELIVERY_RELAY_POLL_MS: '50' },
    });
    ({ key } = await mintKey(db.url, { tenantId: 'cli-a', scopes: ['audit:read', 'audit:export', 'webhooks:write'] }));
    // The address as users know it, the service's origin: the CLI adds the API's path.
    env = { AUDIT_TRAIL_URL: new URL(service.baseUrl).origin, AUDIT_TRAIL_API_KEY: key };
    await seedEvents(db.url, [
      newEvent({ tenantId: 'cli-a', occurredAtMs: T0 + 1, action: 'phi.read', userId: 'u-1', resourceType: 'claim', resourceId: 'c-1' }),
      newEvent({ tenantId: 'cli-a', occurredAtMs: T0 + 2, action: 'phi.update', userId: 'u-2', resourceType: 'claim', resourceId: 'c-2' }),
      newEvent({
        tenantId: 'cli-a',
        occurredAtMs: T0 + 3,
        action: 'phi.read',
        userId: 'u-2',
        resourceType: 'patient_record',
        resourceId: 'c-1',
      }),
      newEvent({ tenantId: 'cli-a', occurredAtMs: T0 + 4, action: 'admin.login', userId: 'u-1', phiInvolved: false, fieldsAccessed: '' }),
      newEvent({ tenantId: 'cli-a', occurredAtMs: T0 + 5, action: 'phi.read', userId: 'evil\u001b]0;owned\u0007', resourceId: 'c-3' }),
      newEvent({ tenantId: 'cli-b', occurredAtMs: T0 + 3, action: 'phi.read', userId: 'u-1', resourceId: 'c-1' }),
    ]);
  });

  after(async () => {
    await service?.stop();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await db?.drop();
  });

  /** The seeded day: the service writes events of its own (key minted, endpoints registered) at the present time. */
  const DAY = ['--since', '2026-10-01T00:00:00Z', '--until', '2026-10-02T00:00:00Z'];

  /** The users of the listed events, newest first, read from NDJSON output. */
  async function usersOf(args: string[]): Promise<string[]> {
    const result = await cli(['events', 'list', '--output', 'ndjson', ...DAY, ...args], env);
    expect(result.code, result.stderr).to.equal(0);
    const events = ndjson(result.stdout);
    for (const event of events) expect(event.tenant_id).to.equal('cli-a');
    return events.map((event) => `${event.user_id}:${event.action}`);
  }

  it("lists the key's tenant's events with each of the API's filters, newest first", async () => {
    expect(await usersOf([])).to.deep.equal([
      'evil\u001b]0;owned\u0007:phi.read',
      'u-1:admin.login',
      'u-2:phi.read',
      'u-2:phi.update',
      'u-1:phi.read',
    ]);
    expect(await usersOf(['--action', 'phi.update'])).to.deep.equal(['u-2:phi.update']);
    expect(await usersOf(['--user-id', 'u-1'])).to.deep.equal(['u-1:admin.login', 'u-1:phi.read']);
    expect(await usersOf(['--resource-type', 'patient_record'])).to.deep.equal(['u-2:phi.read']);
    expect(await usersOf(['--resource-id', 'c-1'])).to.deep.equal(['u-2:phi.read', 'u-1:phi.read']);
    expect(await usersOf(['--resource-type', 'claim', '--resource-id', 'c-1'])).to.deep.equal(['u-1:phi.read']);
    expect(await usersOf(['--phi', 'false'])).to.deep.equal(['u-1:admin.login']);
    const narrower = ['--since', '2026-10-01T00:00:00.003Z', '--until', '2026-10-01T00:00:00.005Z'];
    const result = await cli(['events', 'list', '--output', 'ndjson', ...narrower], env);
    expect(ndjson(result.stdout).map((event) => `${event.user_id}:${event.action}`)).to.deep.equal(['u-1:admin.login', 'u-2:phi.read']);
  });

  it('pages with --limit and --cursor, and --all walks every page exactly once', async () => {
    const first = await cli(['events', 'list', '--output', 'ndjson', '--limit', '2', ...DAY], env);
    expect(first.code).to.equal(0);
    expect(ndjson(first.stdout)).to.have.length(2);
    const cursor = /^more: --cursor (\S+)\n$/.exec(first.stderr)?.[1];
    expect(cursor, first.stderr).to.be.a('string');
    const second = await cli(['events', 'list', '--output', 'ndjson', '--limit', '2', '--cursor', cursor!, ...DAY], env);
    expect(ndjson(second.stdout).map((event) => event.event_id)).not.to.include.members(
      ndjson(first.stdout).map((event) => event.event_id),
    );
    const all = await cli(['events', 'list', '--output', 'ndjson', '--limit', '2', '--all', ...DAY], env);
    expect(all.stderr).to.equal('');
    const ids = ndjson(all.stdout).map((event) => event.event_id);
    expect(ids).to.have.length(5);
    expect(new Set(ids).size).to.equal(5);
    expect(ids.slice(0, 4)).to.deep.equal([...ndjson(first.stdout), ...ndjson(second.stdout)].map((event) => event.event_id));
  });

  it('writes json as the API answers one page, and with --all one document of every event', async () => {
    const page = JSON.parse((await cli(['events', 'list', '--output', 'json', '--limit', '3', ...DAY], env)).stdout);
    expect(page.events).to.have.length(3);
    expect(page.page).to.include({ limit: 3, returned: 3, has_more: true });
    const all = JSON.parse((await cli(['events', 'list', '--output', 'json', '--limit', '2', '--all', ...DAY], env)).stdout);
    expect(Object.keys(all)).to.deep.equal(['events']);
    expect(all.events).to.have.length(5);
  });

  it("prints a table with a header, a line per event and the trail's control characters escaped", async () => {
    const result = await cli(['events', 'list', '--phi', 'true', ...DAY], env);
    expect(result.code).to.equal(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).to.match(/^TIMESTAMP\s+ACTION\s+USER\s+RESOURCE\s+PHI\s+OK\s+EVENT_ID$/);
    expect(lines).to.have.length(5);
    expect(result.stdout).not.to.include('\u001b').and.not.to.include('\u0007');
    expect(lines[1]).to.include('evil\\u001b]0;owned\\u0007');
    expect(lines[1]).to.match(/^2026-10-01T00:00:00\.005Z\s+phi\.read\s+/);
  });

  it('searches with --search and matches an action family with --action-prefix', async () => {
    const result = await cli(['events', 'list', '--search', 'U-2', '--action-prefix', 'phi', ...DAY, '--output', 'ndjson'], env);
    expect(result.code, result.stderr).to.equal(0);
    const found = ndjson(result.stdout).map((event) => [event.action, event.user_id]);
    expect(found).to.deep.equal([
      ['phi.read', 'u-2'],
      ['phi.update', 'u-2'],
    ]);
  });

  it('aligns the columns of a page whose values are longer than the columns are wide', async () => {
    const T1 = Date.parse('2026-10-03T00:00:00.000Z');
    await seedEvents(db.url, [
      newEvent({ tenantId: 'cli-a', occurredAtMs: T1, action: 'phi.read', userId: 'u-9', resourceId: 'r-1' }),
      newEvent({
        tenantId: 'cli-a',
        occurredAtMs: T1 + 1,
        action: 'admin.integration.credentials.rotate',
        userId: 'service-account:nightly-claims-reconciliation',
        resourceType: 'integration',
        resourceId: 'clearinghouse-availity-production-eu-west',
      }),
    ]);
    const result = await cli(['events', 'list', '--since', '2026-10-03T00:00:00Z', '--until', '2026-10-04T00:00:00Z'], env);
    expect(result.code, result.stderr).to.equal(0);
    const [header, ...rows] = result.stdout.trimEnd().split('\n');
    expect(rows).to.have.length(2);
    for (const title of ['ACTION', 'USER', 'RESOURCE', 'PHI', 'OK', 'EVENT_ID']) {
      const at = header!.indexOf(title);
      for (const row of rows) expect(row.slice(at - 2, at) + row[at], `${title} of "${row}"`).to.match(/^ {2}\S$/);
    }
  });

  it("answers the API's refusals in one line: a 422 names the field once, with exit 2 (a bad value); a 401 never shows the key", async () => {
    const invalid = await cli(['events', 'list', '--since', 'yesterday'], env);
    expect(invalid).to.include({ code: 2, stdout: '' });
    expect(invalid.stderr).to.match(/^audit-trail-client: HTTP 422 validation_failed: since: must be .*\[request \S+\]\n$/);
    expect(invalid.stderr.match(/since:/g)).to.have.length(1);
    const unknownKey = `atr_live_${'0'.repeat(8)}_${'1'.repeat(32)}`;
    const refused = await cli(['events', 'list'], { ...env, AUDIT_TRAIL_API_KEY: unknownKey });
    expect(refused).to.include({ code: 1, stdout: '' });
    expect(refused.stderr).to.match(/^audit-trail-client: HTTP 401 unauthorized \(check AUDIT_TRAIL_API_KEY and the address\).*\n$/);
    expect(refused.stderr).not.to.include(unknownKey.slice(18));
  });

  async function receiver(): Promise<TestReceiver> {
    const started = await startReceiver(204);
    receivers.push(started);
    return started;
  }

  async function register(url: string, eventFilter: string[] = []): Promise<{ id: string; secret: string }> {
    const response = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url, event_filter: eventFilter } });
    expect(response.status, response.text).to.equal(201);
    return { id: response.json.endpoint.id, secret: response.json.secret };
  }

  it("changes an endpoint's settings in place, shows its public key, disables and enables it; a refused setting is the service's 422", async () => {
    const hook = await receiver();
    const endpoint = await register(hook.url, ['phi.']);
    const filterDir = await mkdtemp(join(tmpdir(), 'audit-trail-client-filter-'));
    const filterFile = join(filterDir, 'filter.json');
    await writeFile(filterFile, JSON.stringify({ path: 'details.ward', in: ['3B'] }));
    const updated = await cli(
      [
        'webhooks',
        'update',
        endpoint.id,
        '--payload-filter',
        `@${filterFile}`,
        '--timeout',
        '5',
        '--retry-schedule',
        '10s,60',
        '--header',
        'Authorization: Bearer cli-token',
        '--signatures',
        'hmac,ed25519',
        '--ordered',
        '--output',
        'json',
      ],
      env,
    );
    expect(updated.code, updated.stderr).to.equal(0);
    const changed = JSON.parse(updated.stdout).endpoint;
    expect(changed).to.deep.include({
      payload_filter: { path: 'details.ward', in: ['3B'] },
      timeout_s: 5,
      retry_schedule_s: [10, 60],
      header_names: ['Authorization'],
      signature_schemes: ['hmac', 'ed25519'],
      ordered: true,
    });
    expect(updated.stdout).not.to.include('cli-token');
    const keys = await cli(['webhooks', 'public-keys', endpoint.id], env);
    expect(keys.stdout).to.equal(`${changed.public_key}\n`);

    const reset = await cli(
      ['webhooks', 'update', endpoint.id, '--timeout', 'default', '--payload-filter', 'none', '--remove-header', 'authorization'],
      env,
    );
    expect(reset.stdout).to.equal(`endpoint ${endpoint.id} updated: active\n`);
    const after = (await call(`${service.baseUrl}/audit/webhooks`, { key })).json.endpoints.find((e: any) => e.id === endpoint.id);
    expect(after).to.deep.include({ timeout_s: null, payload_filter: null, header_names: [], ordered: true });

    const refused = await cli(['webhooks', 'update', endpoint.id, '--payload-filter', '{"path": "actor.name", "equals": "x"}'], env);
    // A value the service found invalid (its 422) is the user's mistake: exit 2, as for a bad flag.
    expect(refused.code).to.equal(2);
    expect(refused.stderr).to.include('payload_filter.path');
    expect((await cli(['webhooks', 'disable', endpoint.id], env)).stdout).to.equal(`endpoint ${endpoint.id} disabled: disabled\n`);
    expect((await cli(['webhooks', 'enable', endpoint.id], env)).stdout).to.equal(`endpoint ${endpoint.id} enabled: active\n`);
    await rm(filterDir, { recursive: true, force: true });
  });

  it('lists endpoints, sends test deliveries and rotates a secret, which the next delivery is signed with', async () => {
    const hook = await receiver();
    const endpoint = await register(hook.url, ['phi.']);
    const listed = await cli(['webhooks', 'list'], env);
    expect(listed.stdout).to.match(new RegExp(`^${endpoint.id}\\s+yes\\s+0\\s+phi\\.\\s+${hook.url}$`, 'm'));
    expect(JSON.parse((await cli(['webhooks', 'list', '--output', 'json'], env)).stdout).endpoints.map((e: any) => e.id)).to.include(
      endpoint.id,
    );

    const tested = await cli(['webhooks', 'test', endpoint.id], env);
    expect(tested.code, tested.stderr).to.equal(0);
    expect(tested.stdout).to.match(/^test delivery accepted: HTTP 204 in \d+ ms\n$/);
    const delivered = hook.received.at(-1)!;
    expect(verifyWebhookSignature(endpoint.secret, delivered.headers['x-service-signature'] as string, delivered.rawBody).valid).to.equal(
      true,
    );

    hook.reply(500);
    const failing = await cli(['webhooks', 'test', endpoint.id], env);
    expect(failing.code).to.equal(1);
    expect(failing.stdout).to.match(/^test delivery failed: HTTP 500 in \d+ ms\n$/);

    hook.reply(204);
    const rotated = await cli(['webhooks', 'rotate', endpoint.id, '--overlap', '0'], env);
    expect(rotated.code, rotated.stderr).to.equal(0);
    const secret = /^new secret:\s+([0-9a-f]{64})$/m.exec(rotated.stdout)?.[1];
    expect(secret).to.be.a('string').and.not.equal(endpoint.secret);
    expect(rotated.stdout).to.match(/^standard webhooks secret:\s+whsec_\S+$/m);
    expect((await cli(['webhooks', 'test', endpoint.id], env)).code).to.equal(0);
    const after = hook.received.at(-1)!;
    const header = after.headers['x-service-signature'] as string;
    expect(verifyWebhookSignature(secret!, header, after.rawBody).valid).to.equal(true);
    expect(verifyWebhookSignature(endpoint.secret, header, after.rawBody).valid).to.equal(false);
  });

  it('refuses, saying why, to end an overlap in progress with another rotation, unless --force', async () => {
    const hook = await receiver();
    const endpoint = await register(hook.url);
    const first = await cli(['webhooks', 'rotate', endpoint.id, '--overlap', '3600'], env);
    expect(first.code, first.stderr).to.equal(0);
    const overlapping = /^new secret:\s+([0-9a-f]{64})$/m.exec(first.stdout)![1]!;

    const refused = await cli(['webhooks', 'rotate', endpoint.id], env);
    expect(refused).to.include({ code: 1, stdout: '' });
    expect(refused.stderr).to.match(/^audit-trail-client: not rotated: the secret replaced by the last rotation still signs until \S+Z\. /);
    expect(refused.stderr).to.include('--force');
    // Nothing changed: both secrets still sign.
    expect((await cli(['webhooks', 'test', endpoint.id], env)).code).to.equal(0);
    const header = hook.received.at(-1)!.headers['x-service-signature'] as string;
    for (const secret of [endpoint.secret, overlapping]) {
      expect(verifyWebhookSignature(secret, header, hook.received.at(-1)!.rawBody).valid).to.equal(true);
    }

    const forced = await cli(['webhooks', 'rotate', endpoint.id, '--force'], env);
    expect(forced.code, forced.stderr).to.equal(0);
    expect((await cli(['webhooks', 'test', endpoint.id], env)).code).to.equal(0);
    const last = hook.received.at(-1)!;
    expect(verifyWebhookSignature(endpoint.secret, last.headers['x-service-signature'] as string, last.rawBody).valid).to.equal(false);
  });

  it("lists an endpoint's deliveries, retries a failed one and replays a range", async () => {
    const hook = await receiver();
    hook.reply(500);
    const endpoint = await register(hook.url, ['phi.']);
    const at = Date.now();
    const event = newEvent({ tenantId: 'cli-a', occurredAtMs: at, action: 'phi.export' });
    await seedEvents(db.url, [event]);
    await waitFor(() => hook.received.length === 1, 'the first attempt, refused by the receiver', PATIENCE);

    const listed = await cli(['webhooks', 'deliveries', endpoint.id, '--output', 'ndjson'], env);
    expect(listed.code, listed.stderr).to.equal(0);
    await waitFor(
      async () => {
        const [delivery] = ndjson((await cli(['webhooks', 'deliveries', endpoint.id, '--output', 'ndjson'], env)).stdout);
        return delivery?.last_status_code === 500;
      },
      'the failed attempt in the delivery log',
      PATIENCE,
      200,
    );
    const [delivery] = ndjson(
      (await cli(['webhooks', 'deliveries', endpoint.id, '--status', 'pending', '--output', 'ndjson'], env)).stdout,
    );
    expect(delivery).to.include({ event_id: event.eventId, action: 'phi.export', status: 'pending', attempts: 1 });
    const table = await cli(['webhooks', 'deliveries', endpoint.id], env);
    expect(table.stdout).to.match(new RegExp(`^${delivery.id}\\s+pending\\s+1\\s+500\\s+`, 'm'));

    hook.reply(204);
    const retried = await cli(['webhooks', 'retry', endpoint.id, delivery.id], env);
    expect(retried.code, retried.stderr).to.equal(0);
    expect(retried.stdout).to.equal(`retry of ${delivery.id} accepted: one more attempt within a second\n`);
    await waitFor(() => hook.received.length === 2, 'the retried attempt', PATIENCE);
    expect(hook.received[1]!.headers['x-service-delivery-attempt']).to.equal('2');
    await waitFor(
      async () => {
        const [logged] = ndjson((await cli(['webhooks', 'deliveries', endpoint.id, '--output', 'ndjson'], env)).stdout);
        return logged?.status === 'succeeded';
      },
      'the delivery succeeded',
      PATIENCE,
      200,
    );
    const again = await cli(['webhooks', 'retry', endpoint.id, delivery.id], env);
    expect(again).to.include({ code: 1, stdout: '' });
    expect(again.stderr).to.match(/^audit-trail-client: HTTP 409 already_delivered.*\n$/);

    const since = new Date(at - 1000).toISOString();
    const until = new Date(at + 1000).toISOString();
    const replayed = await cli(
      ['webhooks', 'replay', endpoint.id, '--since', since, '--until', until, '--include-delivered', '--wait'],
      env,
    );
    expect(replayed.code, replayed.stderr).to.equal(0);
    expect(replayed.stdout).to.match(/^replay rpl_\S+ (running|completed): \d+ events matched, \d+ deliveries created\n/);
    expect(replayed.stdout).to.match(/^replay rpl_\S+ completed: 1 events matched, 1 deliveries created\n$/m);
    await waitFor(
      () => hook.received.some((received, index) => index >= 2 && received.json().id === event.eventId),
      'the replayed delivery',
      PATIENCE,
    );
  });

  it('verifies an export with proofs offline: exit 0 when intact, 1 naming an altered event', async () => {
    const pair = sealKeyPair();
    const sealer = await startTestSealer(db.url, pair.privateKey);
    const dir = await mkdtemp(join(tmpdir(), 'audit-trail-client-verify-'));
    try {
      await sealer.sealNow();
      const exported = await call(`${service.baseUrl}/audit/export?format=ndjson&proofs=true`, { key, body: {} });
      expect(exported.status, exported.text).to.equal(200);
      await writeFile(join(dir, 'public.pem'), pair.publicPem);
      await writeFile(join(dir, 'export.ndjson'), exported.text);
      const intact = await cli(['verify', '--export', join(dir, 'export.ndjson'), '--public-key', join(dir, 'public.pem')]);
      expect(intact.code, intact.stderr).to.equal(0);
      expect(intact.stdout).to.match(/^verified: \d+ events, \d+ proven against the tree head of size \d+/);
      await writeFile(join(dir, 'altered.ndjson'), exported.text.replace('"user_id":"u-2"', '"user_id":"u-9"'));
      const altered = await cli(['verify', '--export', join(dir, 'altered.ndjson'), '--public-key', join(dir, 'public.pem')]);
      expect(altered.code).to.equal(1);
      expect(altered.stderr).to.match(/^audit-trail-client verify: event [0-9a-f-]{36}: /m);
      expect(altered.stderr).to.match(/^audit-trail-client verify: FAILED/m);
    } finally {
      await sealer.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
