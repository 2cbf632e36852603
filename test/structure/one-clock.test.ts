import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * Time and chance come from one place (issue 48): outside platform/ (and the standalone client), code takes a
 * Clock and a RandomSource instead of calling Date.now(), new Date() or Math.random() where it decides.
 * `make lint` enforces it with a Biome plugin (lint/one-clock-and-chance.grit); this checks that the rule, as
 * biome.jsonc scopes it, still bites: on a copy of the configuration, against probes in each kind of folder.
 */
const ROOT = join(import.meta.dirname, '../..');
const PROBE = [
  'export const a = Date.now();',
  'export const b = new Date();',
  'export const c = Math.random();',
  'export const d = new Date(0);',
  'export const e = [1].map(Date.now);',
  '',
].join('\n');

interface Diagnostic {
  readonly category: string;
  readonly location: { readonly path: string; readonly start: { readonly line: number } };
}

describe('one clock and one source of chance', () => {
  let directory: string;
  let flagged: Diagnostic[];

  before(async function () {
    this.timeout(60_000);
    directory = mkdtempSync(join(tmpdir(), 'one-clock-'));
    cpSync(join(ROOT, 'biome.jsonc'), join(directory, 'biome.jsonc'));
    cpSync(join(ROOT, 'lint'), join(directory, 'lint'), { recursive: true });
    for (const folder of ['streams', 'platform', 'client']) {
      mkdirSync(join(directory, 'src', folder), { recursive: true });
      writeFileSync(join(directory, 'src', folder, 'probe.ts'), PROBE);
    }
    const biome = join(ROOT, 'node_modules/.bin/biome');
    const run = await promisify(execFile)(biome, ['lint', '--vcs-enabled=false', '--reporter=json', '--max-diagnostics=none', '.'], {
      cwd: directory,
    }).catch((failed: { stdout: string }) => failed);
    flagged = (JSON.parse(run.stdout) as { diagnostics: Diagnostic[] }).diagnostics.filter(
      (diagnostic) => diagnostic.category === 'plugin',
    );
  });

  after(() => rmSync(directory, { recursive: true, force: true }));

  it('refuses Date.now, argument-less new Date() and Math.random in src/ outside platform/, called or passed', () => {
    const lines = flagged
      .filter((diagnostic) => diagnostic.location.path === 'src/streams/probe.ts')
      .map((diagnostic) => diagnostic.location.start.line);
    expect(lines).to.deep.equal([1, 2, 3, 5]);
  });

  it('lets platform/, where the clock and the random source live, and the standalone client read them', () => {
    expect(flagged.map((diagnostic) => diagnostic.location.path).filter((path) => !path.startsWith('src/streams/'))).to.deep.equal([]);
  });
});
