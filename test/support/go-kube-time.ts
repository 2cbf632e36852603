import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Go's own reading of Kubernetes timestamps: test/support/go/kubetime.go, built with the Go toolchain of
 * Debian's golang-go (make services installs it, as it installs promtool), parses each value with the layout
 * the API server decodes it with (metav1.MicroTime: RFC3339Micro; metav1.Time: time.RFC3339). The binary is
 * built once per source into node_modules/.cache (no network: the program uses the standard library only).
 */
export interface GoParse {
  readonly value: string;
  /** What time.Parse answered; empty when it parsed. */
  readonly error: string;
  /** The value as metav1 writes it back (UTC; whole seconds for a Time). */
  readonly canonical: string;
}

const SOURCE = 'test/support/go/kubetime.go';
let built: string | undefined;

function goBinary(): string {
  const candidates = ['go', '/usr/lib/go/bin/go', '/usr/local/go/bin/go'];
  for (const candidate of candidates) {
    if (spawnSync(candidate, ['version'], { stdio: 'ignore' }).status === 0) return candidate;
  }
  throw new Error('go is missing: make services installs it (Debian package golang-go)');
}

function kubeTimeChecker(): string {
  if (built) return built;
  const source = readFileSync(SOURCE);
  const cache = join('node_modules', '.cache', 'go-kubetime');
  const target = join(cache, createHash('sha256').update(source).digest('hex').slice(0, 16), 'kubetime');
  if (!existsSync(target)) {
    // Built beside the target and renamed, so that a concurrent run never executes half a binary.
    const staging = `${target}.${process.pid}.tmp`;
    mkdirSync(join(target, '..'), { recursive: true });
    execFileSync(goBinary(), ['build', '-o', staging, SOURCE], {
      env: {
        ...process.env,
        CGO_ENABLED: '0',
        GOPROXY: 'off',
        GOFLAGS: '',
        GOTOOLCHAIN: 'local',
        GOCACHE: join(process.cwd(), cache, 'build-cache'),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    renameSync(staging, target);
    rmSync(staging, { force: true });
  }
  built = target;
  return target;
}

/** Each value parsed by Go as the API server parses a field of that type. */
export function parseWithGo(values: ReadonlyArray<{ type: 'MicroTime' | 'Time'; value: string }>): GoParse[] {
  const output = execFileSync(kubeTimeChecker(), { input: JSON.stringify(values), encoding: 'utf8' });
  return JSON.parse(output) as GoParse[];
}
