import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The small Go programs the tests run as independent checkers (test/support/go/*.go), built with the toolchain
 * of Debian's golang-go (make test-tools installs it), offline: no module proxy. Each is built once per source
 * into node_modules/.cache.
 */

const built = new Map<string, string>();

function goBinary(): string {
  for (const candidate of ['go', '/usr/lib/go/bin/go', '/usr/local/go/bin/go']) {
    if (spawnSync(candidate, ['version'], { stdio: 'ignore' }).status === 0) return candidate;
  }
  throw new Error('go is missing: make test-tools installs it (Debian package golang-go)');
}

/**
 * The binary of `source` (test/support/go/<name>.go), built if this source was not built before. `env` adds
 * to the build's environment (GOPATH mode over Debian's packaged libraries, say).
 */
export function goProgram(source: string, env: Record<string, string> = {}): string {
  const known = built.get(source);
  if (known) return known;
  const name = source.replace(/^.*\//, '').replace(/\.go$/, '');
  const cache = join('node_modules', '.cache', `go-${name}`);
  const target = join(cache, createHash('sha256').update(readFileSync(source)).digest('hex').slice(0, 16), name);
  if (!existsSync(target)) {
    // Built beside the target and renamed, so that a concurrent run never executes half a binary.
    const staging = `${target}.${process.pid}.tmp`;
    mkdirSync(join(target, '..'), { recursive: true });
    execFileSync(goBinary(), ['build', '-o', staging, source], {
      env: {
        ...process.env,
        CGO_ENABLED: '0',
        GOPROXY: 'off',
        GOFLAGS: '',
        GOTOOLCHAIN: 'local',
        GOCACHE: join(process.cwd(), cache, 'build-cache'),
        ...env,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    renameSync(staging, target);
    rmSync(staging, { force: true });
  }
  built.set(source, target);
  return target;
}
