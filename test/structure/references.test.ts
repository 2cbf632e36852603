import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/**
 * Words that point somewhere must point at something that is there: a comment naming a file the reader
 * cannot open (a design note kept outside the repository, a module since moved) sends them looking for
 * nothing. Paths named in src/ are checked against the repository, and README's layout against src/.
 */
const ROOT = join(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Paths with at least one folder, of the kinds the project's comments name: `live/liveFeed.ts`, `docs/api.md`. */
const NAMED_PATH = /(?<![\w/.@-])((?:[A-Za-z_][\w.-]*\/)+[\w.-]+\.(?:ts|md|sql|json|yaml|tpl|cjs|go))\b/g;
/** Documents that exist only outside the repository, named without a folder. */
const OUTSIDE_DOCUMENTS = /\b(?:DESIGN|SPEC|STYLE)\.md\b/;

/** Whether `path` names a file, read from the repository's root, from src/, or from the naming file's folder. */
function resolves(path: string, from: string): boolean {
  return [ROOT, SRC, dirname(from)].some((base) => existsSync(join(base, path)));
}

describe('references in the source', () => {
  it('name only files the repository has', () => {
    const broken: string[] = [];
    for (const file of sourceFiles(SRC)) {
      const text = readFileSync(file, 'utf8');
      text.split('\n').forEach((line, index) => {
        const where = `${relative(ROOT, file)}:${index + 1}`;
        if (OUTSIDE_DOCUMENTS.test(line)) broken.push(`${where} names a document outside the repository`);
        for (const [, path] of line.matchAll(NAMED_PATH)) {
          // Paths under a URL, a package (node_modules) or a template placeholder are not the repository's.
          if (/^(?:node_modules|https?|[a-z]+:)/.test(path!) || path!.includes('<')) continue;
          if (!resolves(path!, file)) broken.push(`${where} names ${path}, which is not there`);
        }
      });
    }
    expect(broken).to.deep.equal([]);
  });

  it("README's layout lists every folder of src/", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const layout = readme.slice(readme.indexOf('## Layout'));
    const folders = readdirSync(SRC, { withFileTypes: true }).filter((entry) => entry.isDirectory());
    const missing = folders.map((entry) => `src/${entry.name}`).filter((folder) => !new RegExp(`${folder}\\b`).test(layout));
    expect(missing).to.deep.equal([]);
  });
});
