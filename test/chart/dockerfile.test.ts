import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { expectBuilt } from '../support/builtOutputs.ts';
import { databaseUrl, testDatabaseName } from '../support/database.ts';
import { explainOfflineFailure, offlineNpmEnvironment } from '../support/offlineNpm.ts';

const run = promisify(execFile);

/** Dockerfile instructions, continuation lines joined. */
function instructions(): Array<{ keyword: string; args: string }> {
  return readFileSync('Dockerfile', 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [keyword, ...rest] = line.split(/\s+/);
      return { keyword: keyword!.toUpperCase(), args: rest.join(' ') };
    });
}

describe('container image', function () {
  // The offline production install takes about 50 s alone on this 2-core machine, 163 s while a second clone's
  // make test and other suites ran (load average about 25), and once went past the 180 s this had.
  this.timeout(360_000);

  it('builds on Node 24 in two stages and runs as a numeric non-root user under tini', () => {
    const steps = instructions();
    const bases = steps.filter((step) => step.keyword === 'FROM').map((step) => step.args);
    expect(bases).to.have.length(2);
    for (const base of bases) expect(base).to.match(/^node:24[-.]/);
    const user = steps.filter((step) => step.keyword === 'USER').at(-1)!.args;
    expect(user).to.match(/^[1-9]\d*(:\d+)?$/);
    const entrypoint = JSON.parse(steps.find((step) => step.keyword === 'ENTRYPOINT')!.args) as string[];
    expect(entrypoint).to.deep.equal(['/usr/bin/tini', '--', 'node', '--max-semi-space-size=32', '/app/dist/cli.js']);
    const runtime = steps.slice(steps.findLastIndex((step) => step.keyword === 'FROM'));
    expect(runtime.some((step) => step.keyword === 'RUN' && /npm ci --omit=dev/.test(step.args))).to.equal(true);
    expect(runtime.some((step) => step.keyword === 'RUN' && /apt-get install .*tini/.test(step.args))).to.equal(true);
  });

  it('copies only files that exist and that .dockerignore lets through', () => {
    const allowed = readFileSync('.dockerignore', 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('!'))
      .map((line) => line.slice(1).replace(/\/$/, ''));
    const sources = instructions()
      .filter((step) => step.keyword === 'COPY' && !step.args.startsWith('--from'))
      .flatMap((step) => step.args.split(/\s+/).slice(0, -1));
    expect(sources.length).to.be.greaterThan(3);
    for (const source of sources) {
      expect(existsSync(source), source).to.equal(true);
      expect(allowed, `${source} is excluded by .dockerignore`).to.include(source.replace(/\/$/, ''));
    }
  });

  it('runs its entrypoint from a clean production install of the packed package', async () => {
    const node = process.execPath; // Node 24: `--omit=dev` drops the node devDependency that provides it.
    const npmEnv = offlineNpmEnvironment();
    // The image packs what its build stage built; here that is the clone's build, which make test made.
    expectBuilt();
    const workdir = mkdtempSync(join(tmpdir(), 'audit-trail-pack-'));
    const database = testDatabaseName('image');
    const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
    await admin.connect();
    try {
      const { stdout } = await run('npm', ['pack', '--silent', '--pack-destination', workdir], { env: npmEnv });
      await run('tar', ['-xzf', join(workdir, stdout.trim().split('\n').at(-1)!), '-C', workdir]);
      const app = join(workdir, 'package');
      expect(readdirSync(app)).to.include.members(['dist', 'migrations', 'package.json']);
      cpSync('package-lock.json', join(app, 'package-lock.json'));
      // From npm's cache, as make test's own `npm ci` left it: the suite reaches no registry.
      await run('npm', ['ci', '--omit=dev', '--ignore-scripts'], { cwd: app, env: npmEnv }).catch(explainOfflineFailure);
      expect(existsSync(join(app, 'node_modules', 'typescript')), 'dev dependencies installed').to.equal(false);

      const help = await run(node, ['dist/cli.js', '--help'], { cwd: app });
      expect(help.stdout).to.include('audit-trail serve');
      const version = await run(node, ['dist/cli.js', '--version'], { cwd: app });
      expect(version.stdout.trim()).to.equal(JSON.parse(readFileSync('package.json', 'utf8')).version);

      // The migrations ship in the package and the installed CLI applies them.
      await admin.query(`CREATE DATABASE ${database}`);
      await run(node, ['dist/cli.js', 'migrate'], {
        cwd: app,
        env: { ...process.env, DATABASE_URL: databaseUrl(database), LOG_LEVEL: 'warn' },
      });
      const migrated = new pg.Client({ connectionString: databaseUrl(database) });
      await migrated.connect();
      const { rows } = await migrated.query(
        `SELECT count(*)::int AS tables FROM pg_tables WHERE tablename IN ('events', 'api_keys', 'webhook_endpoints', 'deliveries')`,
      );
      await migrated.end();
      expect(rows[0].tables).to.equal(4);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
      rmSync(workdir, { recursive: true, force: true });
    }
  });
});
