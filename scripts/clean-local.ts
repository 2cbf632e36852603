// `make clean-local`: removes what `make run` made for this clone on the machine's shared servers (its database,
// its JetStream streams, its rate-limit counters in Redis) and then its local state, .local/ with the secrets.
// Only its own: the names come from .local/dev.env and must be the ones make run derives (audit_trail_local_…,
// local_…), so nothing another clone, a test or a real deployment made is ever touched.
// Usage: node scripts/clean-local.ts [state directory, default $RUN_LOCAL_DIR or .local]
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import pg from 'pg';
import { BusNames } from '../src/bus/jetStreamDefinitions.ts';

const stateDir = resolve(process.argv[2] ?? process.env.RUN_LOCAL_DIR ?? '.local');
const say = (line: string) => console.error(`clean-local: ${line}`);

/** KEY=VALUE lines as run-local.sh writes them (a value may be single-quoted). */
function readEnvFile(path: string): Record<string, string> {
  const entries = readFileSync(path, 'utf8')
    .split('\n')
    .map((line) => /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line))
    .filter((match) => match !== null)
    .map((match) => [match[1]!, match[2]!.replace(/^'(.*)'$/, '$1')]);
  return Object.fromEntries(entries);
}

/** The deployment make run set up for this state directory, or undefined when dev.env names none of its own. */
function ownDeployment(settings: Record<string, string>): { database: URL; namespace: string; redisPrefix: string } | undefined {
  const namespace = settings.NATS_NAMESPACE ?? '';
  if (!/^local_[a-z0-9_]+$/.test(namespace) || settings.DATABASE_URL === undefined) return undefined;
  const database = new URL(settings.DATABASE_URL);
  if (database.pathname !== `/audit_trail_${namespace}`) return undefined;
  if (settings.RATE_LIMIT_KEY_PREFIX !== `audit-trail:${namespace}:rl`) return undefined;
  return { database, namespace, redisPrefix: settings.RATE_LIMIT_KEY_PREFIX };
}

/** Drops the database; refuses while the service (or anyone) is connected to it, rather than cutting them off. */
async function dropDatabase(url: URL): Promise<void> {
  const name = url.pathname.slice(1); // checked above: letters, digits and _ only
  const maintenance = new URL(url);
  maintenance.pathname = '/postgres';
  const client = new pg.Client({ connectionString: maintenance.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${name}"`);
    say(`dropped the database ${name}`);
  } catch (error) {
    // 55006 object_in_use: something is connected to it.
    if ((error as { code?: string }).code === '55006') {
      say(`the database ${name} is in use: stop make run (Ctrl-C) first; nothing was removed`);
      process.exit(1);
    }
    throw error;
  } finally {
    await client.end();
  }
}

async function deleteStreams(natsUrl: string, namespace: string): Promise<void> {
  // With a namespace the deployment id plays no part in the names.
  const names = new BusNames({ namespace, deploymentId: '' });
  const nc = await connect({ servers: natsUrl, reconnect: false });
  try {
    const jsm = await jetstreamManager(nc);
    for (const stream of names.streams()) {
      const deleted = await jsm.streams.delete(stream).catch(() => false);
      if (deleted) say(`deleted the JetStream stream ${stream}`);
    }
  } finally {
    await nc.close();
  }
}

async function deleteRateLimitCounters(redisUrl: string, prefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    let removed = 0;
    for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 500 }) as AsyncIterable<string[]>) {
      if (keys.length > 0) removed += await redis.unlink(...keys);
    }
    say(`removed ${removed} rate-limit counters under ${prefix}`);
  } finally {
    redis.disconnect();
  }
}

const envFile = join(stateDir, 'dev.env');
if (!existsSync(envFile)) {
  say(`${envFile} does not exist: make run made nothing here to remove`);
  process.exit(0);
}
const settings = readEnvFile(envFile);
const deployment = ownDeployment(settings);
if (deployment === undefined) {
  // A dev.env of an earlier make run, which shared the database audit_trail and the un-namespaced streams with
  // every other clone: none of that is this clone's alone to remove.
  say(`${envFile} names no database or NATS namespace of this clone's own: removing only ${stateDir}`);
} else {
  await dropDatabase(deployment.database);
  await deleteStreams(settings.NATS_URL ?? 'nats://127.0.0.1:4222', deployment.namespace);
  await deleteRateLimitCounters(settings.REDIS_URL ?? 'redis://127.0.0.1:6379', deployment.redisPrefix);
}
rmSync(stateDir, { recursive: true, force: true });
say(`removed ${stateDir}`);
