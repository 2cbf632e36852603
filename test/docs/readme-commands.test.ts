import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { expectBuilt } from '../support/builtOutputs.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { runInFreshShell } from '../support/freshShell.ts';
import { TEST_PEPPER } from '../support/service.ts';
import { SERVICE_VERSION } from '../../src/platform/version.ts';

/** Runs a command line as printed, in a fresh shell; its exit code and output. */
const runAsPrinted = runInFreshShell;

/** The command lines of README.md's shell blocks and inline code, where a newcomer copies them from. */
function readmeCommands(): string[] {
  const readme = readFileSync('README.md', 'utf8');
  const blockLines = [...readme.matchAll(/```(?:sh|bash)\n([\s\S]*?)```/g)].flatMap((block) => block[1]!.split('\n'));
  const inline = [...readme.matchAll(/`([^`\n]+)`/g)].map((match) => match[1]!);
  return [...blockLines, ...inline].map((line) => line.trim()).filter(Boolean);
}

describe('the commands README.md prints, run in a fresh shell', function () {
  // Four npx runs of the CLI: 18 s alone, 42 s under load, past 60 s with two clones' make test at once.
  this.timeout(180_000);
  let db: TestDatabase;

  before(async () => {
    expectBuilt();
    db = await createTestDatabase();
  });

  after(async () => {
    await db?.drop();
  });

  it('names no command that needs Node 24 without saying how to get it', () => {
    const commands = readmeCommands();
    // `audit-trail` is not on a newcomer's PATH, and `node` may be the machine's older one.
    expect(commands.filter((line) => /^(\S+=\S+\s+)*audit-trail\s/.test(line))).to.deep.equal([]);
    expect(commands.filter((line) => /(^|\s)node\s+(examples|dist|src|scripts)\//.test(line))).to.deep.equal([]);
    expect(commands).to.include.members(['npx audit-trail keys list [--tenant acme] [--json]', 'WEBHOOK_SECRET=… npm run receiver']);
  });

  it('runs the operator CLI through npx on the project Node: mint, list and revoke a key', async () => {
    const settings = { DATABASE_URL: db.url, KEY_PEPPER: TEST_PEPPER };
    const version = await runAsPrinted('npx audit-trail --version');
    expect(version, version.stderr).to.include({ code: 0, stdout: `${SERVICE_VERSION}\n` });

    const minted = await runAsPrinted(
      'npx audit-trail keys mint --tenant newcomer --scopes audit:read,audit:export --description "README check"',
      settings,
    );
    expect(minted.code, minted.stderr).to.equal(0);
    expect(minted.stdout).to.match(/^atr_live_[0-9a-f]{8}_[0-9a-f]{32}\n$/);
    const lookupId = minted.stdout.split('_')[2]!;

    const listed = await runAsPrinted('npx audit-trail keys list --tenant newcomer --json', settings);
    expect(listed.code, listed.stderr).to.equal(0);
    expect(JSON.parse(listed.stdout)).to.have.deep.nested.property('[0]').that.includes({ lookup_id: lookupId, state: 'active' });

    const revoked = await runAsPrinted(`npx audit-trail keys revoke ${lookupId}`, settings);
    expect(revoked.code, revoked.stderr).to.equal(0);
    expect(revoked.stdout).to.equal(`revoked ${lookupId} (tenant newcomer)\n`);
  });
});
