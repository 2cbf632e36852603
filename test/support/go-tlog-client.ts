import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The Go checksum database's client code as a verifier of our log: test/support/go/tlogclient.go, built with
 * Debian's golang-go against golang.org/x/mod/sumdb/{note,tlog} from Debian's golang-golang-x-mod-dev (make
 * services installs both). Offline: GOPATH mode over /usr/share/gocode, no module proxy. Built once per source
 * into node_modules/.cache, like the kubetime checker (go-kube-time.ts).
 */

const SOURCE = 'test/support/go/tlogclient.go';
const GOPATH = '/usr/share/gocode';
let built: string | undefined;

function goBinary(): string {
  for (const candidate of ['go', '/usr/lib/go/bin/go', '/usr/local/go/bin/go']) {
    if (spawnSync(candidate, ['version'], { stdio: 'ignore' }).status === 0) return candidate;
  }
  throw new Error('go is missing: make services installs it (Debian package golang-go)');
}

function tlogClient(): string {
  if (built) return built;
  if (!existsSync(join(GOPATH, 'src/golang.org/x/mod/sumdb/tlog'))) {
    throw new Error('golang.org/x/mod is missing: make services installs it (Debian package golang-golang-x-mod-dev)');
  }
  const source = readFileSync(SOURCE);
  const cache = join('node_modules', '.cache', 'go-tlogclient');
  const target = join(cache, createHash('sha256').update(source).digest('hex').slice(0, 16), 'tlogclient');
  if (!existsSync(target)) {
    const staging = `${target}.${process.pid}.tmp`;
    mkdirSync(join(target, '..'), { recursive: true });
    execFileSync(goBinary(), ['build', '-o', staging, SOURCE], {
      env: {
        ...process.env,
        CGO_ENABLED: '0',
        GO111MODULE: 'off',
        GOPATH,
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

export interface GoTlogResult {
  /** 0 when every check passed. */
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the Go client against a log prefix (…/api/v2/public/audit/integrity); arguments as tlogclient.go takes them. */
export function runGoTlogClient(options: {
  prefix: string;
  apiKey: string;
  vkey: string;
  leaves?: readonly number[];
  oldCheckpointFile?: string;
}): Promise<GoTlogResult> {
  const args = ['-url', options.prefix, '-key', options.apiKey, '-vkey', options.vkey];
  if (options.leaves) args.push('-leaves', options.leaves.join(','));
  if (options.oldCheckpointFile) args.push('-old', options.oldCheckpointFile);
  const binary = tlogClient();
  return new Promise((resolve) => {
    execFile(binary, args, { encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ status: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
