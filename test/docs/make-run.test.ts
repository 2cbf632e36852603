import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import pg from 'pg';
import { launchBrowser } from '../support/browser.ts';
import { expectBuilt } from '../support/builtOutputs.ts';
import { databaseUrl } from '../support/database.ts';
import { localised, serviceCommands } from '../support/docCommands.ts';
import { runInFreshShell, spawnInFreshShell } from '../support/freshShell.ts';
import { freePort } from '../support/ports.ts';
import { waitFor } from '../support/wait.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** `make run` as a newcomer starts it: scripts/run-local.sh from a fresh shell, in its own process group (a terminal's). */
class LocalRun {
  output = '';
  private readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;

  constructor(variables: Record<string, string>) {
    this.child = spawnInFreshShell('exec bash scripts/run-local.sh', variables, { detached: true });
    this.child.stdout!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.child.stderr!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = once(this.child, 'exit').then(([code]) => code as number | null);
  }

  /** Waits for the banner, which comes once the service is ready, seeded and has signed a tree head. */
  async banner(): Promise<string> {
    let exited = false;
    void this.exited.then(() => (exited = true));
    await waitFor(() => exited || this.output.includes('Stop with Ctrl-C'), 'the make run banner', 120_000, 200);
    expect(exited, `make run exited before its banner:\n${this.output}`).to.equal(false);
    return this.output.slice(this.output.indexOf('audit-trail is running'));
  }

  /** Ctrl-C in its terminal: SIGINT to the whole group. */
  async stop(): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) process.kill(-this.child.pid!, 'SIGINT');
    return this.exited;
  }
}

/** The indented command lines of one section of the banner, as a reader copies them. */
function section(banner: string, heading: string): string {
  const start = banner.indexOf(`\n${heading}`);
  expect(start, `no section "${heading}" in the banner`).to.be.greaterThan(-1);
  const rest = banner.slice(start + 1);
  const body = rest.slice(rest.indexOf('\n') + 1, rest.indexOf('\n\n'));
  return body
    .split('\n')
    .filter((line) => line.startsWith('  '))
    .join('\n');
}

/** A block of the banner pasted into a fresh shell, stopping at the first command that fails. */
const runAsPasted = (script: string) => runInFreshShell(`set -e\n${script}`);

function readDevEnv(stateDir: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(join(stateDir, 'dev.env'), 'utf8')
      .split('\n')
      .filter((line) => line.includes('='))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

async function databaseExists(name: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: databaseUrl('postgres') });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1::text', [name]);
    return rowCount === 1;
  } finally {
    await client.end();
  }
}

async function streamNames(prefix: string): Promise<string[]> {
  const nc = await connect({ servers: NATS_URL });
  try {
    const names: string[] = [];
    for await (const name of (await jetstreamManager(nc)).streams.names()) if (name.startsWith(prefix)) names.push(name);
    return names.sort();
  } finally {
    await nc.close();
  }
}

async function redisKeys(prefix: string): Promise<string[]> {
  const redis = new Redis(REDIS_URL);
  try {
    const keys: string[] = [];
    for await (const batch of redis.scanStream({ match: `${prefix}:*`, count: 500 }) as AsyncIterable<string[]>) keys.push(...batch);
    return keys;
  } finally {
    redis.disconnect();
  }
}

describe('make run, as a newcomer uses it', function () {
  this.timeout(240_000);
  let stateDir: string;
  let variables: Record<string, string>;
  let run: LocalRun | undefined;

  before(async () => {
    expectBuilt();
    stateDir = await realpath(await mkdtemp(join(tmpdir(), 'audit-trail-make-run-')));
    // Ports of its own and a state directory of its own, which makes it a deployment of its own.
    variables = { RUN_LOCAL_DIR: stateDir, PORT: String(await freePort()), INTERNAL_PORT: String(await freePort()) };
  });

  after(async () => {
    await run?.stop();
    // Nothing to clean when the before hook failed ahead of making the state directory (dist/ not built).
    if (stateDir === undefined) return;
    if (existsSync(join(stateDir, 'dev.env'))) await runAsPasted(`node_modules/.bin/node scripts/clean-local.ts ${stateDir}`);
    await rm(stateDir, { recursive: true, force: true });
  });

  it('serves every role but the controller, as its banner and README say, and its integrity commands work as pasted', async () => {
    run = new LocalRun(variables);
    const banner = await run.banner();
    const roles = 'api, ingest, relay, worker, sealer, streams';
    expect(banner).to.include(`audit-trail is running: ${roles} (every role but the Kubernetes controller)`);
    // README's quickstart says it in a shell comment that wraps: joined without the wrapping's `#`.
    const readme = readFileSync('README.md', 'utf8').replace(/\n\s*#?\s*/g, ' ');
    expect(readme).to.include(`serves every role but the Kubernetes controller (${roles})`);
    const metrics = await (await fetch(`http://127.0.0.1:${variables.INTERNAL_PORT}/metrics`)).text();
    expect(metrics).to.include('# TYPE audit_events_sealed_total counter');

    const integrity = section(banner, 'Tamper evidence');
    expect(integrity)
      .to.match(/\/audit\/integrity\/tree-head/)
      .and.match(/\/proof"/)
      .and.match(/npx audit-trail-client verify --export/);
    const pasted = await runAsPasted(integrity);
    expect(pasted.code, pasted.stderr + pasted.stdout).to.equal(0);
    const [head, proof, verified] = pasted.stdout.trim().split('\n');
    expect(JSON.parse(head!)).to.include({ tenant_id: 'demo' }).and.to.have.property('signature');
    expect(JSON.parse(proof!)).to.have.property('audit_path').that.is.an('array').that.is.not.empty;
    // 300 demo events and the demo key's admin.key.create, all sealed within the second SEAL_INTERVAL gives.
    expect(verified).to.match(
      /^verified: (\d+) events, \1 proven against the tree head of size \d+ .*; 1 saved tree heads consistent with it$/,
    );
    expect(Number(/^verified: (\d+)/.exec(verified!)![1])).to.be.at.least(301);
  });

  it('prints customer CLI commands that work as pasted', async () => {
    const commands = section(await run!.banner(), 'The customer CLI').split('\n');
    expect(commands.join('\n'))
      .to.match(/npx audit-trail-client events tail --follow$/m)
      .and.match(/npx audit-trail-client listen --forward-to http:\/\/127\.0\.0\.1:\d+\/$/m);
    // tail --follow and listen run until Ctrl-C; the others run as pasted, in order.
    const pasted = await runAsPasted(commands.filter((line) => !/ --follow| listen /.test(line)).join('\n'));
    expect(pasted.code, pasted.stderr).to.equal(0);
    const [header, ...rows] = pasted.stdout.trimEnd().split('\n');
    expect(header).to.match(/^TIMESTAMP\s+ACTION\s+USER/);
    expect(rows).to.have.length(5);
    for (const row of rows) expect(row).to.match(/^\S+Z\s+phi\.read\s/);
  });

  it('prints a customer portal link for the demo tenant that opens the trail in a browser, once', async () => {
    const banner = await run!.banner();
    const link = /Customer portal for tenant demo.*\n {2}(\S+)\n/.exec(banner)?.[1];
    expect(link, banner).to.match(new RegExp(`^http://127\\.0\\.0\\.1:${variables.PORT}/portal/#link=psl_`));
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.goto(link!);
      await page.locator('table.events tbody tr').first().waitFor();
      expect(await page.getByText('Tenant demo').count()).to.equal(1);
      const again = await browser.newPage();
      await again.goto(link!);
      await again.getByRole('heading', { name: 'This link has already been used' }).waitFor();
      // The banner's command for another link, as pasted.
      const another = await runAsPasted(section(banner, 'Customer portal for tenant demo').split('\n').slice(1).join('\n'));
      expect(another.stdout.trim()).to.match(/\/portal\/#link=psl_/);
    } finally {
      await browser.close();
    }
  });

  it('runs every command of docs/*.md that talks to a service, as written, with the variables its banner exports', async function () {
    this.timeout(180_000);
    const banner = await run!.banner();
    const exported = /^ {2}export BASE=(\S+) KEY=(\S+) INTERNAL_URL=(\S+) OPERATOR_TOKEN=(\S+)$/m.exec(banner);
    expect(exported, banner).not.to.equal(null);
    const [, base, key, internal, operatorToken] = exported!;
    // OPERATOR_TOKENS is set for this clone, and the token printed is one of them.
    expect(/Operator token \(internal\): +(\S+)/.exec(banner)![1]).to.equal(operatorToken);
    expect(readDevEnv(stateDir).OPERATOR_TOKENS!.split(',')).to.include(operatorToken);
    const ingestToken = /Ingest token \(internal port\): +(\S+)/.exec(banner)![1]!;

    // What the docs' example ids stand for: an endpoint, a stream and events of this service's demo tenant.
    const api = async (path: string, body: unknown, bearer = key!, at = base!) => {
      const response = await fetch(`${at}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(response.status, `${path}: ${await response.clone().text()}`).to.be.lessThan(300);
      return (await response.json()) as any;
    };
    const endpoint = (await api('/audit/webhooks', { url: 'https://hooks.example.org/audit' })).endpoint.id as string;
    const stream = (await api('/audit/streams', { destination: { type: 'https', url: 'https://collector.example.org/audit' } })).stream
      .id as string;
    const ingested = await api(
      '/internal/v1/events',
      {
        events: [1, 2].map((index) => ({
          tenant_id: 'demo',
          action: 'phi.read',
          user_id: `u-${index}`,
          user_role: 'clinician',
          resource_type: 'patient_chart',
          resource_id: `p-${index}`,
          phi_involved: true,
          fields_accessed: ['diagnosis'],
          justification: 'asked by Jane Roe',
          details: { patient_name: 'Jane Roe' },
          success: true,
        })),
      },
      ingestToken,
      internal!,
    );
    const events: string[] = ingested.events.map((event: { event_id: string }) => event.event_id);

    const { run: commands, left } = serviceCommands();
    // What this test exists for: the stream and redaction commands refused locally before (403, 404).
    expect(commands.map((command) => command.doc)).to.include.members(['streams.md', 'retention.md', 'webhooks.md']);
    for (const skipped of left) expect(skipped.why, skipped.text).to.be.a('string');
    const prelude = [
      `cd "${process.cwd()}" && set -a && . "${stateDir}/dev.env" && set +a`,
      `export BASE="${base}" KEY="${key}" INTERNAL_URL="${internal}" OPERATOR_TOKEN="${operatorToken}"`,
      // A refusal of the service fails the command, as a reader reading its answer would notice.
      'curl() { command curl --fail-with-body "$@"; }',
    ].join('\n');
    for (const command of commands) {
      const event = command.text.includes('0190f3c2-...') ? events.shift()! : '';
      const text = localised(command.text, { endpoint, stream, event, tenant: 'demo' });
      const ran = await runAsPasted(`${prelude}\n${text}`);
      expect(ran.code, `${command.doc}: ${text}\n${ran.stderr}${ran.stdout}`).to.equal(0);
    }
    expect(events, 'both example event ids used').to.deep.equal([]);
  });

  it("keeps the clone's own database, NATS namespace and demo key across runs, and make clean-local removes them", async () => {
    const settings = readDevEnv(stateDir);
    const clone = basename(process.cwd())
      .toLowerCase()
      .replace(/[^a-z0-9]/g, '_')
      .slice(0, 20);
    const deployment = `local_${clone}_${createHash('sha256').update(stateDir).digest('hex').slice(0, 8)}`;
    expect(settings).to.include({
      DATABASE_URL: `postgres://postgres@127.0.0.1:5432/audit_trail_${deployment}`,
      NATS_NAMESPACE: deployment,
      RATE_LIMIT_KEY_PREFIX: `audit-trail:${deployment}:rl`,
    });
    const streamPrefix = `${deployment.toUpperCase()}_`;
    // Deliveries, producers' events, and the fork guard's ledger of signed heads (integrity/forkGuard.ts).
    expect(await streamNames(streamPrefix)).to.deep.equal([
      `${streamPrefix}AUDIT_DELIVERIES`,
      `${streamPrefix}AUDIT_INGEST`,
      `${streamPrefix}AUDIT_SIGNED_HEADS`,
    ]);
    const firstKey = /API key \(tenant demo\): +(\S+)/.exec(run!.output)![1]!;
    expect(await run!.stop()).to.equal(0);

    run = new LocalRun(variables);
    const banner = await run.banner();
    expect(/API key \(tenant demo\): +(\S+)/.exec(banner)![1]).to.equal(firstKey);
    const page = await fetch(`http://127.0.0.1:${variables.PORT}/api/v2/public/audit/events?resource_type=patient_record&limit=1000`, {
      headers: { authorization: `Bearer ${firstKey}` },
    });
    // Seeded once: a fifth of the 300 demo events read a patient record.
    expect(((await page.json()) as { events: unknown[] }).events).to.have.length(60);
    expect(await run.stop()).to.equal(0);
    run = undefined;
    expect(await redisKeys(settings.RATE_LIMIT_KEY_PREFIX!)).not.to.be.empty;

    const cleaned = await runAsPasted(`node_modules/.bin/node scripts/clean-local.ts ${stateDir}`);
    expect(cleaned.code, cleaned.stderr).to.equal(0);
    expect(await databaseExists(`audit_trail_${deployment}`)).to.equal(false);
    expect(await streamNames(streamPrefix)).to.deep.equal([]);
    expect(await redisKeys(settings.RATE_LIMIT_KEY_PREFIX!)).to.deep.equal([]);
    expect(existsSync(stateDir)).to.equal(false);
  });
});
