import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { AUDIT_EVENT_FIELDS } from '../../src/client/auditEvent.ts';
import { signDelivery } from '../../src/client/webhookSigning.ts';
import { expectBuilt } from '../support/builtOutputs.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { offlineNpmEnvironment } from '../support/offlineNpm.ts';
import { mintKey, startTestService, type TestService } from '../support/service.ts';

const run = promisify(execFile);
const PACKAGE_DIRECTORY = resolve('packages/client');
const TSC = resolve('node_modules/.bin/tsc');

/** A scratch project's environment: offline, npm's cache its own, no inherited module paths or Node options. */
function scratchEnvironment(scratch: string): NodeJS.ProcessEnv {
  const { NODE_OPTIONS: _options, NODE_PATH: _path, ...inherited } = process.env;
  return offlineNpmEnvironment({ ...inherited, npm_config_cache: join(scratch, '.npm-cache') });
}

describe('the @audit-trail/client package, packed and installed in a project of its own', function () {
  this.timeout(120_000);
  let scratch: string;
  let db: TestDatabase;
  let api: TestService;
  let packedFiles: string[];

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'audit-trail-client-'));
    const env = scratchEnvironment(scratch);
    // What make build built from src/client (the same build script as the package's prepack, which is not run
    // here: it would empty packages/client/dist under the CLI tests running beside this file).
    expectBuilt();
    const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', scratch], {
      cwd: PACKAGE_DIRECTORY,
      env,
    });
    const [packed] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    packedFiles = packed!.files.map((file) => file.path);
    const project = join(scratch, 'project');
    await mkdir(project);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
    // A package without dependencies needs nothing but its tarball, and an empty cache.
    await run('npm', ['install', join(scratch, packed!.filename)], { cwd: project, env });

    db = await createTestDatabase();
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('ships every module of src/client, compiled, with its declarations', async () => {
    const modules = (await readdir('src/client', { recursive: true }))
      .filter((file) => file.endsWith('.ts'))
      .map((file) => file.replace(/\.ts$/, ''));
    expect(modules).to.include.members(['index', 'auditTrailClient', 'auditEvent', 'webhookSignature', 'cli/main']);
    const expected = modules.flatMap((module) => [`dist/${module}.js`, `dist/${module}.d.ts`]);
    expect(packedFiles.filter((path) => path.startsWith('dist/') && !path.endsWith('.map'))).to.have.members(expected);
  });

  it('installs with no dependencies at all', async () => {
    const project = join(scratch, 'project');
    const lock = JSON.parse(await readFile(join(project, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
    expect(Object.keys(lock.packages).filter((path) => path !== '')).to.deep.equal(['node_modules/@audit-trail/client']);
    const manifest = JSON.parse(await readFile(join(project, 'node_modules/@audit-trail/client/package.json'), 'utf8'));
    const declared = ['dependencies', 'peerDependencies', 'optionalDependencies'].flatMap((field) => Object.keys(manifest[field] ?? {}));
    expect(declared).to.deep.equal([]);
    // .bin holds the package's own command, audit-trail-client.
    expect(await readdir(join(project, 'node_modules'))).to.have.members(['.bin', '.package-lock.json', '@audit-trail']);
  });

  it('lists real events and verifies a signature of the service, from plain Node', async () => {
    const T0 = Date.parse('2026-09-01T00:00:00.000Z');
    const events = [
      newEvent({ tenantId: 'packaged', occurredAtMs: T0 }),
      newEvent({ tenantId: 'packaged', occurredAtMs: T0 + 1, phiInvolved: false }),
    ];
    await seedEvents(db.url, events);
    const { key } = await mintKey(db.url, { tenantId: 'packaged', scopes: ['audit:read'] });
    const secret = 'ab'.repeat(32);
    const body = '{"type":"phi.read","id":"0190c2a4-7a1e-7c3b-9a4e-1d2c3b4a5f60"}';
    const program = `
      import { AuditTrailClient, verifyWebhookSignature } from '@audit-trail/client';
      const client = new AuditTrailClient({ baseUrl: process.env.BASE_URL, apiKey: process.env.API_KEY });
      const events = [];
      // limit 1: the walk follows next_cursor; the key's own admin.key.create event is filtered out.
      for await (const event of client.listEvents({ action: 'phi.read', limit: 1 })) events.push(event);
      const { SECRET, SIGNATURE, BODY } = process.env;
      console.log(JSON.stringify({
        events,
        verdict: verifyWebhookSignature(SECRET, SIGNATURE, BODY),
        tampered: verifyWebhookSignature(SECRET, SIGNATURE, BODY.replace('read', 'rEad')),
      }));`;
    const project = join(scratch, 'project');
    await writeFile(join(project, 'use.js'), program);
    const { stdout } = await run(process.execPath, ['use.js'], {
      cwd: project,
      env: {
        ...scratchEnvironment(scratch),
        BASE_URL: api.baseUrl,
        API_KEY: key,
        SECRET: secret,
        SIGNATURE: signDelivery(secret, body),
        BODY: body,
      },
    });
    const result = JSON.parse(stdout);
    expect(result.events.map((event: { event_id: string }) => event.event_id)).to.deep.equal([events[1]!.eventId, events[0]!.eventId]);
    expect(Object.keys(result.events[0])).to.deep.equal(Object.keys(AUDIT_EVENT_FIELDS));
    expect(result.events[0]).to.include({ tenant_id: 'packaged', phi_involved: false, timestamp: '2026-09-01T00:00:00.001Z' });
    expect(result.verdict).to.include({ valid: true });
    expect(result.tampered).to.deep.equal({ valid: false, reason: 'signature_mismatch' });
  });

  it('installs the customer CLI as the bin audit-trail-client, which lists real events from the package alone', async () => {
    const project = join(scratch, 'project');
    const { key } = await mintKey(db.url, { tenantId: 'packaged-cli', scopes: ['audit:read'] });
    await seedEvents(db.url, [newEvent({ tenantId: 'packaged-cli', occurredAtMs: Date.parse('2026-09-02T00:00:00.000Z') })]);
    const { stdout } = await run(
      join(project, 'node_modules/.bin/audit-trail-client'),
      ['events', 'list', '--action', 'phi.read', '--output', 'ndjson'],
      {
        cwd: project,
        env: { ...scratchEnvironment(scratch), AUDIT_TRAIL_URL: api.baseUrl, AUDIT_TRAIL_API_KEY: key },
      },
    );
    const listed = stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(listed.map((event) => [event.tenant_id, event.timestamp])).to.deep.equal([['packaged-cli', '2026-09-02T00:00:00.000Z']]);
  });

  it("runs from its tarball outside any project, as docs/cli.md says (npx --yes -p), on the machine's own Node and npm, saying nothing but its answer", async () => {
    // A customer's shell: no clone, no node_modules/.bin of ours on PATH, the machine's node and npx.
    const outside = join(scratch, 'customer');
    await mkdir(outside);
    // The release artifact, as README and docs/cli.md say to make it.
    const manifest = JSON.parse(await readFile(join(PACKAGE_DIRECTORY, 'package.json'), 'utf8'));
    const tarball = `audit-trail-client-${manifest.version}.tgz`;
    await run('make', ['--no-print-directory', '-s', 'client-package'], { env: scratchEnvironment(scratch) });
    await copyFile(join('dist/release', tarball), join(outside, tarball));
    const { key } = await mintKey(db.url, { tenantId: 'packaged-npx', scopes: ['audit:read'] });
    await seedEvents(db.url, [newEvent({ tenantId: 'packaged-npx', occurredAtMs: Date.parse('2026-09-03T00:00:00.000Z') })]);
    const env = {
      ...offlineNpmEnvironment({ PATH: '/usr/local/bin:/usr/bin:/bin', HOME: outside }),
      npm_config_cache: join(scratch, '.npm-cache-customer'),
      AUDIT_TRAIL_URL: api.baseUrl,
      AUDIT_TRAIL_API_KEY: key,
    };
    const machineNode = (await run('node', ['--version'], { cwd: outside, env })).stdout.trim();
    // Offline: a request to a registry would fail with ENOTCACHED. The tarball is all npx needs; --yes, as a
    // script runs it, skips its question (or its notice, without a terminal) before installing the tarball.
    const listed = await run('npx', ['--yes', '-p', `./${tarball}`, 'audit-trail-client', 'events', 'list', '--output', 'ndjson'], {
      cwd: outside,
      env,
    });
    expect(listed.stderr, `on ${machineNode}`).to.equal('');
    const events = listed.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(events.filter((event) => event.action === 'phi.read').map((event) => event.timestamp)).to.deep.equal([
      '2026-09-03T00:00:00.000Z',
    ]);
    // The engines npm checks the machine's Node against: every Node the client's code runs on, from 20.
    expect(manifest.engines).to.deep.equal({ node: '>=20' });
    expect(Number(/^v(\d+)/.exec(machineNode)![1])).to.be.at.least(20);
  });

  it('types the events and the shapes of the API from its declarations, in a TypeScript project of its own', async () => {
    const project = join(scratch, 'project');
    await writeFile(
      join(project, 'consumer.ts'),
      `
      import { type AuditEvent, type PortalSessionLink, type VerificationResult, type WebhookReplay } from '@audit-trail/client';
      import { AUDIT_EVENT_FIELDS } from '@audit-trail/client/auditEvent';
      import { AuditTrailApiError, AuditTrailClient, type ClientOptions } from '@audit-trail/client/auditTrailClient';
      declare const event: AuditEvent;
      declare const link: PortalSessionLink;
      declare const replay: WebhookReplay;
      export const url: string = link.url;
      export const matched: number = replay.events_matched;
      export const options: ClientOptions = { baseUrl: 'https://audit.example.com/api/v2/public', apiKey: 'k' };
      export const client = new AuditTrailClient(options);
      export const isApiError = (error: unknown): boolean => error instanceof AuditTrailApiError;
      export const id: string = event.event_id;
      export const phi: boolean = event.phi_involved;
      export const fields: Array<keyof typeof AUDIT_EVENT_FIELDS> = ['details'];
      // @ts-expect-error success is a boolean
      export const wrong: string = event.success;
      // @ts-expect-error fields the service may add are unknown, not any
      export const missing: 'x' = event.no_such_field;
      export type Verdict = VerificationResult['valid'];
    `,
    );
    await writeFile(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2024',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          noEmit: true,
          // The package's declarations mention Buffer and fetch: a Node project has @types/node, here the repository's.
          typeRoots: [resolve('node_modules/@types')],
          types: ['node'],
        },
        files: ['consumer.ts'],
      }),
    );
    const checked = await run(TSC, ['-p', project]).then(
      () => '',
      (failure: { stdout?: string }) => failure.stdout ?? String(failure),
    );
    expect(checked).to.equal('');
  });
});
