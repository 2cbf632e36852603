import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

/**
 * The folders of src/ are layers, and an import may only point down (or stay in its folder): the composition
 * root and its roles (each role wires the layers below into a running part of the service) → edges (CLI,
 * HTTP, the Kubernetes controller) → adapters and processes (delivery, ingestion, streams, live) → domain (auth,
 * webhooks, integrity, and above them the lifecycle: retention, holds, expiry, redaction) → the trail (events)
 * → infrastructure (db, bus) → platform and config. The customer
 * client stands alone. A picture of the imports with an arrow going up is a design asking for a change;
 * this keeps the picture honest.
 */
const LAYERS: ReadonlyArray<readonly string[]> = [
  ['platform'],
  ['config'],
  ['db', 'bus'],
  ['events'],
  ['auth', 'webhooks', 'integrity'],
  ['lifecycle'],
  ['delivery', 'ingestion', 'streams', 'live'],
  ['http', 'controller', 'cli'],
  ['roles'],
  ['(root)'],
];
const STANDALONE = ['client'];

const SRC = join(import.meta.dirname, '../../src');

function folderOf(file: string): string {
  const path = relative(SRC, file);
  return path.includes('/') ? path.split('/')[0]! : '(root)';
}

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Every relative import between two folders of src/, with the file it is written in. */
function folderImports(): Array<{ file: string; from: string; to: string }> {
  return sourceFiles(SRC).flatMap((file) =>
    [...readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)[^'"]*?from '(\.{1,2}\/[^']+)'/gm)].flatMap((match) => {
      const target = normalize(join(dirname(file), match[1]!));
      const [from, to] = [folderOf(file), folderOf(target)];
      return from === to ? [] : [{ file: relative(SRC, file), from, to }];
    }),
  );
}

describe('source layout', () => {
  const levelOf = (folder: string) => LAYERS.findIndex((layer) => layer.includes(folder));

  it('places every folder of src/ in a layer', () => {
    const folders = new Set(sourceFiles(SRC).map(folderOf));
    const unplaced = [...folders].filter((folder) => levelOf(folder) < 0 && !STANDALONE.includes(folder));
    expect(unplaced).to.deep.equal([]);
  });

  it('imports only downwards, so no two folders import each other', () => {
    const upward = folderImports()
      .filter(({ from, to }) => !STANDALONE.includes(from) && !STANDALONE.includes(to) && levelOf(to) >= levelOf(from))
      .map(({ file, to }) => `${file} → ${to}/`);
    expect(upward).to.deep.equal([]);
  });

  it('keeps the customer client free of the service: it imports nothing outside src/client', () => {
    const leaving = folderImports()
      .filter(({ from }) => from === 'client')
      .map(({ file, to }) => `${file} → ${to}/`);
    expect(leaving).to.deep.equal([]);
  });
});
