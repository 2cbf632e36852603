import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { goProgram } from './goPrograms.ts';

/**
 * The Go checksum database's client code as a verifier of our log: test/support/go/tlogclient.go, built with
 * Debian's golang-go against golang.org/x/mod/sumdb/{note,tlog} from Debian's golang-golang-x-mod-dev (make
 * test-tools installs both). Offline: GOPATH mode over /usr/share/gocode, no module proxy. Built once per source
 * (goPrograms.ts).
 */

const SOURCE = 'test/support/go/tlogclient.go';
const GOPATH = '/usr/share/gocode';

function tlogClient(): Promise<string> {
  if (!existsSync(join(GOPATH, 'src/golang.org/x/mod/sumdb/tlog'))) {
    throw new Error('golang.org/x/mod is missing: make test-tools installs it (Debian package golang-golang-x-mod-dev)');
  }
  return goProgram(SOURCE, { GO111MODULE: 'off', GOPATH });
}

export interface GoTlogResult {
  /** 0 when every check passed. */
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the Go client against a log prefix (…/api/v2/public/audit/integrity); arguments as tlogclient.go takes them. */
export async function runGoTlogClient(options: {
  prefix: string;
  apiKey: string;
  vkey: string;
  leaves?: readonly number[];
  oldCheckpointFile?: string;
}): Promise<GoTlogResult> {
  const args = ['-url', options.prefix, '-key', options.apiKey, '-vkey', options.vkey];
  if (options.leaves) args.push('-leaves', options.leaves.join(','));
  if (options.oldCheckpointFile) args.push('-old', options.oldCheckpointFile);
  const binary = await tlogClient();
  return new Promise((resolve) => {
    execFile(binary, args, { encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ status: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
