import { execFile } from 'node:child_process';
import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { ServiceMetrics } from '../../src/platform/metrics.ts';
import type { StreamRegistry } from '../../src/streams/streamRegistry.ts';
import { StreamRunner } from '../../src/streams/streamRunner.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { startTestService, TEST_ENCRYPTION_KEY, testLogger, type TestService } from '../support/service.ts';
import { SplunkHecReceiver } from '../support/siem-receivers.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';
import { waitFor } from '../support/wait.ts';

const ACTOR = { userId: 'test', userRole: 'operator' };
/** The Node.js defaults of prom-client: their names are the library's, not ours. */
const LIBRARY_FAMILIES = /^(process|nodejs)_/;

/** promtool's lint of an exposition (Debian's prometheus package, as test/chart uses it): its complaints, one a line. */
function promtoolCheck(exposition: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = execFile('promtool', ['check', 'metrics'], (error, stdout, stderr) => {
      if ((error as NodeJS.ErrnoException | null)?.code === 'ENOENT') {
        reject(new Error('promtool is missing: make services installs it (Debian package prometheus)'));
        return;
      }
      resolve(`${stdout}${stderr}`.split('\n').filter((line) => line.trim() !== ''));
    });
    child.stdin!.end(exposition);
  });
}

/** Each family of an exposition: its name, HELP and TYPE. */
function families(exposition: string): Array<{ name: string; help: string; type: string }> {
  const help = new Map<string, string>();
  const found: Array<{ name: string; help: string; type: string }> = [];
  for (const line of exposition.split('\n')) {
    const helpLine = /^# HELP (\S+) (.*)$/.exec(line);
    if (helpLine) help.set(helpLine[1]!, helpLine[2]!);
    const typeLine = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (typeLine) found.push({ name: typeLine[1]!, help: help.get(typeLine[1]!) ?? '', type: typeLine[2]! });
  }
  return found;
}

/**
 * /metrics as Prometheus and promtool read it: every family of ours under `audit_` (the eleven renamed ones
 * also under their old names, marked deprecated, for one release), route labels that are route templates,
 * a stream's series gone with the stream, and nothing promtool's lint objects to in our families.
 */
describe('the /metrics exposition', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({ databaseUrl: db.url, roles: ['api'] });
  });
  after(async () => {
    await service?.stop();
    await db?.drop();
  });

  const exposition = async () => (await fetch(`${service.internalUrl}/metrics`)).text();

  it('names every family of ours audit_…, the old names kept beside the new with a HELP that says they are deprecated', async () => {
    await fetch(`${service.baseUrl}/audit/events`);
    const found = families(await exposition()).filter((family) => !LIBRARY_FAMILIES.test(family.name));
    const names = new Set(found.map((family) => family.name));
    for (const family of found) {
      if (family.name.startsWith('audit_')) continue;
      expect(family.help, family.name).to.match(
        new RegExp(`^Deprecated: renamed audit_${family.name}, and removed in the next release\\. `),
      );
      expect(names.has(`audit_${family.name}`), family.name).to.equal(true);
    }
    for (const renamed of ['http_request_duration_seconds', 'webhook_delivery_attempts_total', 'rate_limiter_fallback_active'])
      expect(names.has(renamed) && names.has(`audit_${renamed}`), renamed).to.equal(true);
  });

  it('labels a request refused before its route (a 401) with the route’s template, never a router pattern', async () => {
    expect((await fetch(`${service.baseUrl}/audit/streams/str_${'0'.repeat(32)}`)).status).to.equal(401);
    expect((await fetch(`${service.baseUrl}/no/such/route`)).status).to.equal(404);
    const text = await exposition();
    const routes = new Set(
      [...text.matchAll(/^audit_http_request_duration_seconds_count\{[^}]*route="([^"]*)"/gm)].map((match) => match[1]!),
    );
    expect(routes).to.include('/api/v2/public/audit/streams/:id');
    for (const route of routes) expect(route, 'a route label').to.match(/^(\/[A-Za-z0-9_.:-]*)+$|^unmatched$/);
    // The old name carries the same series.
    expect(text).to.include('http_request_duration_seconds_count{route="/api/v2/public/audit/streams/:id",method="GET",status="401"}');
  });

  it('passes promtool check metrics: nothing said of any family of ours', async () => {
    const complaints = await promtoolCheck(await exposition());
    expect(complaints.filter((line) => !LIBRARY_FAMILIES.test(line))).to.deep.equal([]);
  });

  describe('a log stream’s series', () => {
    let pool: Database;
    let sealer: TestSealer;
    let registry: StreamRegistry;
    let hec: SplunkHecReceiver;
    let runner: StreamRunner;
    const metrics = new ServiceMetrics();

    before(async () => {
      pool = new Database({ url: db.url, poolSize: 3, applicationName: 'metrics test', log: testLogger() });
      sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
      registry = testStreamRegistry(pool);
      hec = await new SplunkHecReceiver({ tokens: { good: {} } }).start();
      runner = new StreamRunner({
        db: pool,
        secrets: new SecretBox(TEST_ENCRYPTION_KEY),
        destinations: { timeoutMs: 5_000, allowPrivateTargets: true },
        pollMs: 50,
        leaseMs: 5_000,
        capacity: 10,
        failingRetryMs: 200,
        log: testLogger(),
        metrics,
      });
    });
    after(async () => {
      await runner?.stop();
      await hec?.stop();
      await sealer?.close();
      await pool?.close();
    });

    it('go when the stream is deleted, and promtool finds nothing to say of them meanwhile', async () => {
      await seedEvents(db.url, [newEvent({ tenantId: 'metered' }), newEvent({ tenantId: 'metered' })]);
      await sealer.sealNow();
      const { stream } = await registry.create(
        'metered',
        { destination: { type: 'splunk_hec', url: hec.url, token: 'good' }, start_at: '2020-01-01T00:00:00Z' },
        ACTOR,
      );
      await sealer.sealNow();
      runner.start();
      await waitFor(
        async () => (await metrics.registry.metrics()).includes(`audit_stream_events_delivered_total{stream="${stream.id}"} 3`),
        'delivered',
      );
      await waitFor(
        async () => (await metrics.registry.metrics()).includes(`audit_stream_lag_events{stream="${stream.id}"} 0`),
        'the lag read',
      );
      expect((await promtoolCheck(await metrics.registry.metrics())).filter((line) => !LIBRARY_FAMILIES.test(line))).to.deep.equal([]);
      await registry.delete('metered', stream.id, ACTOR);
      await waitFor(async () => !(await metrics.registry.metrics()).includes(stream.id), 'every series of the deleted stream gone');
    });
  });
});
