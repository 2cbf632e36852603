import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { COMMAND_USAGE } from '../../src/cli/usage.ts';

const run = promisify(execFile);

/** The CLI with no configuration at all: help must not need any. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['src/cli.ts', ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

const STACK_FRAME = /^\s+at .+[:(]/m;

describe('audit-trail --help of every command', function () {
  this.timeout(60_000);

  const asks: Array<[string, string[]]> = [
    ...Object.keys(COMMAND_USAGE).map((command): [string, string[]] => [command, [command, '--help']]),
    ['import', ['import', '-h']],
    ['import', ['help', 'import']],
    ['keys', ['keys', 'mint', '--help']],
    ['integrity', ['integrity', 'check', '--tenant', 't', '--help']],
  ];
  for (const [command, args] of asks) {
    it(`prints the usage of ${command} for \`${args.join(' ')}\` and exits 0`, async () => {
      const result = await cli(args);
      expect(result.code, result.stderr).to.equal(0);
      expect(result.stderr).to.equal('');
      expect(result.stdout).to.match(/^Usage:\n/);
      for (const line of COMMAND_USAGE[command]!) expect(result.stdout).to.include(line);
    });
  }

  it('names an unknown option in one line, without a stack, and exits 2', async () => {
    for (const args of [
      ['import', '--bogus', 'file.ndjson'],
      ['keys', 'list', '--bogus'],
      ['migrate', '--bogus'],
      ['verify', '--bogus'],
    ]) {
      // keys needs its pepper before it reads its options; nothing connects to anything.
      const result = await cli(args, { KEY_PEPPER: 'p'.repeat(32), DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
      expect(result.code, args.join(' ')).to.equal(2);
      expect(result.stderr).to.match(/^audit-trail: Unknown option '--bogus'.*see audit-trail \w+ --help\n$/);
      expect(result.stderr).not.to.match(STACK_FRAME);
    }
  });

  it('answers help for a command that does not exist with a usage error', async () => {
    const result = await cli(['nope', '--help']);
    expect(result.code).to.equal(1);
    expect(result.stderr).to.equal('audit-trail: unknown command "nope"; see audit-trail --help\n');
  });
});
