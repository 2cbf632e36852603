import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * The small Go programs the tests run as independent checkers (test/support/go/*.go), built with the toolchain
 * of Debian's golang-go (make test-tools installs it), offline: no module proxy. Each is built once per source
 * into node_modules/.cache. The build runs beside the event loop, never blocking it: the files that check our
 * transparency log with Go run the service in their own process, and a build of 4–10 s with the loop held
 * (execFileSync, as this was) starved it (test/support/file-timings.cjs named them).
 */

const built = new Map<string, Promise<string>>();

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
export function goProgram(source: string, env: Record<string, string> = {}): Promise<string> {
  let known = built.get(source);
  if (known === undefined) {
    known = build(source, env);
    built.set(source, known);
    // A failed build is tried again by the next caller, as when each call built.
    known.catch(() => built.delete(source));
  }
  return known;
}

async function build(source: string, env: Record<string, string>): Promise<string> {
  const name = source.replace(/^.*\//, '').replace(/\.go$/, '');
  const cache = join('node_modules', '.cache', `go-${name}`);
  const target = join(cache, createHash('sha256').update(readFileSync(source)).digest('hex').slice(0, 16), name);
  if (existsSync(target)) return target;
  // Built beside the target and renamed, so that a concurrent run never executes half a binary.
  const staging = `${target}.${process.pid}.tmp`;
  mkdirSync(join(target, '..'), { recursive: true });
  await promisify(execFile)(goBinary(), ['build', '-o', staging, source], {
    env: {
      ...process.env,
      CGO_ENABLED: '0',
      GOPROXY: 'off',
      GOFLAGS: '',
      GOTOOLCHAIN: 'local',
      GOCACHE: join(process.cwd(), cache, 'build-cache'),
      ...env,
    },
  });
  renameSync(staging, target);
  rmSync(staging, { force: true });
  return target;
}
