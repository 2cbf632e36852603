// Counts the test files that run without services: no Postgres, Redis or NATS (issue 48 asks for 40 %).
//
// A file needs services when it, or a module of test/ it imports (followed through their own imports), loads
// a client of one (pg, ioredis, NATS), one of the service's modules that opens a connection (Database, the
// bus, Redis, the service itself), or names the machine's own (127.0.0.1:5432, :6379, :4222). A variable
// named DATABASE_URL is no sign: configuration, chart and CLI tests give unreachable or in-cluster addresses.
// Type-only imports load nothing and are not followed. The test is by module, not by function: a file that
// imports a pure helper from a module of test/support that also seeds a database counts as needing services,
// so the count errs low.
//
// Usage: node scripts/service-free-tests.ts [--list]   (--list names each file, service-free ones first)
import { globSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

const ROOT = join(import.meta.dirname, '..');

/**
 * Modules whose loading (for their values) means a connection: the clients, and the service's openers; for
 * the service's entry point, only its start (defaultRoles and the like load nothing of it).
 */
const CONNECTING_MODULES: ReadonlyArray<{ readonly module: RegExp; readonly names?: readonly string[] }> = [
  { module: /^pg$/ },
  { module: /^ioredis$/ },
  { module: /^@nats-io\/(transport-node|nats-core)$/ },
  { module: /src\/db\/(database|postgresClient|notificationListener|migrate)\.ts$/ },
  { module: /src\/bus\/natsConnection\.ts$/ },
  { module: /src\/auth\/redisConnection\.ts$/ },
  { module: /src\/main\.ts$/, names: ['startService'] },
];
/** The addresses of the machine's Postgres, Redis and NATS. */
const SERVICE_ADDRESSES = /\b(127\.0\.0\.1|localhost):(5432|6379|4222)\b/;

/** The modules a file loads for their values, with the names it imports: `import type` and `export type` load nothing. */
function valueImports(source: string): Array<{ readonly specifier: string; readonly names: string }> {
  return [...source.matchAll(/^\s*(import|export)(?!\s+type\s)([^'";]*?)from\s+'([^']+)'|^\s*import\s+'([^']+)'/gm)].map((match) => ({
    specifier: (match[3] ?? match[4])!,
    names: match[2] ?? '',
  }));
}

const verdicts = new Map<string, boolean>();

/** Whether loading `file` (a module of the repository) may connect to a service. */
function needsServices(file: string, visiting = new Set<string>()): boolean {
  const known = verdicts.get(file);
  if (known !== undefined) return known;
  if (visiting.has(file)) return false;
  visiting.add(file);
  const source = readFileSync(file, 'utf8');
  let needs = SERVICE_ADDRESSES.test(source);
  for (const { specifier, names } of valueImports(source)) {
    if (needs) break;
    const target = specifier.startsWith('.') ? normalize(join(dirname(file), specifier)) : specifier;
    const connecting = CONNECTING_MODULES.find(({ module }) => module.test(target));
    if (connecting) needs = connecting.names?.some((name) => new RegExp(`\\b${name}\\b`).test(names)) ?? true;
    // Modules of test/ are followed; those of src/ are libraries, and only the openers above connect.
    else if (target.startsWith(join(ROOT, 'test')) && /\.[cm]?[jt]s$/.test(target)) needs = needsServices(target, visiting);
  }
  verdicts.set(file, needs);
  return needs;
}

const files = globSync('test/**/*.test.ts', { cwd: ROOT }).sort();
const free = files.filter((file) => !needsServices(join(ROOT, file)));
if (process.argv.includes('--list')) {
  for (const file of free) process.stdout.write(`service-free  ${file}\n`);
  for (const file of files.filter((file) => !free.includes(file))) process.stdout.write(`services      ${file}\n`);
}
const share = Math.round((1000 * free.length) / files.length) / 10;
process.stdout.write(`${free.length} of ${files.length} test files run without services (${share} %)\n`);
