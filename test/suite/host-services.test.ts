import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * The machine's Postgres, Redis and NATS are shared by everyone working on it and by test runs going on
 * beside ours. Tests that need an outage start servers of their own (test/support/private-services.ts) and
 * kill those by PID. This keeps the rule kept: no test, script, benchmark or service code may stop,
 * restart or flush a server it did not start, or kill processes by name.
 */
const SCANNED = ['src', 'test', 'scripts', 'bench', 'Makefile', 'package.json'];
const THIS_FILE = 'test/suite/host-services.test.ts';

const FORBIDDEN: Array<{ what: string; pattern: RegExp }> = [
  { what: 'stops or restarts a Debian Postgres cluster', pattern: /pg_ctlcluster\b.*\b(stop|restart|reload)\b/ },
  { what: 'stops a system service', pattern: /\b(systemctl|service)\b.*\b(stop|restart|kill)\b.*\b(postgres|redis|nats)/i },
  { what: 'stops daemons by executable (every nats-server on the host)', pattern: /start-stop-daemon\b.*(--stop\b|\s-K\b)/ },
  { what: 'kills processes by name', pattern: /\b(pkill|killall)\b/ },
  { what: 'shuts Redis down', pattern: /redis-cli\b.*\bshutdown\b|\bshutdown\b.*\bnosave\b/i },
  // Case matters: ioredis' flushall()/flushdb(), the commands in capitals or quoted; not a flushAll() of our own.
  { what: 'flushes Redis', pattern: /\.flush(all|db)\(|\bFLUSH(ALL|DB)\b|['"`]flush(all|db)['"`]/ },
  { what: 'signals a NATS server by name', pattern: /nats-server\b.*(--signal\b|\s-sl\b)/ },
];

function filesUnder(path: string): string[] {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return [];
  if (stat.isFile()) return [path];
  return readdirSync(path).flatMap((entry) => (entry === 'node_modules' || entry.startsWith('.') ? [] : filesUnder(join(path, entry))));
}

describe('the test suite and the machine it runs on', () => {
  it('never stops, restarts or flushes a service it did not start', () => {
    const files = SCANNED.flatMap(filesUnder).filter(
      (file) => /\.(ts|cjs|js|sh|json)$|Makefile$/.test(file) && relative('.', file) !== THIS_FILE,
    );
    expect(files.length, 'files scanned').to.be.greaterThan(50);
    const offences: string[] = [];
    for (const file of files) {
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, index) => {
          for (const { what, pattern } of FORBIDDEN) if (pattern.test(line)) offences.push(`${file}:${index + 1} ${what}: ${line.trim()}`);
        });
    }
    expect(offences).to.deep.equal([]);
  });
});
