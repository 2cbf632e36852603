import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * Randomness comes from one place: code that spreads its retries takes a RandomSource (platform/backoff.ts)
 * so that its tests can name the delay they expect, instead of calling Math.random() where it decides. The
 * customer client stands alone (it imports nothing of the service) and keeps its own.
 */
const SRC = join(import.meta.dirname, '../../src');
const ALLOWED = ['platform/', 'client/'];

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

describe('randomness in the service', () => {
  it('is drawn only in platform/ (and the standalone client)', () => {
    const drawing = sourceFiles(SRC)
      .map((file) => relative(SRC, file))
      .filter((file) => !ALLOWED.some((folder) => file.startsWith(folder)))
      .filter((file) => readFileSync(join(SRC, file), 'utf8').includes('Math.random('));
    expect(drawing).to.deep.equal([]);
  });
});
