import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './ports.ts';
import type { TestPki } from './test-pki.ts';

/**
 * Postgres, NATS and Redis servers that one test file starts, stops (cleanly or by crashing them) and
 * removes, for tests of how the service rides out an outage, and of how it connects to them as production
 * runs them: TLS with a private CA and client certificates, NATS credentials, a JetStream cluster. The
 * machine's own servers are shared by everyone working on it and must never be stopped, restarted or
 * flushed by a test.
 *
 * Each server is a child process of the test run, with its files in a temporary directory of its own that
 * is also its working directory. It is killed only by its own PID. The directory goes when the test calls
 * remove(); if the run ends without that (a failed hook, Ctrl-C, process.exit), an exit hook kills the
 * server and removes the directory; if the run itself was killed, the next run sweeps what it left.
 */

/** How a test takes a server away: a clean shutdown, or a crash that gives it no chance to tidy up. */
type StopMode = 'clean' | 'crash';

/** TLS only, with the server certificate of a test CA (test-pki.ts); verifyClients demands a client certificate too. */
interface ServerTls {
  readonly pki: TestPki;
  readonly verifyClients?: boolean;
}

export interface Launch {
  readonly command: string;
  readonly args: readonly string[];
  /** Variables added to the test run's environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** The OS user to run as, when it must not be root (Postgres refuses to). */
  readonly user?: { uid: number; gid: number };
  /**
   * A supervisor whose children must die with it (pg_autoctl restarts Postgres): started as the leader of a
   * process group of its own, and crashed by signalling that group, whose id is its PID.
   */
  readonly processGroup?: boolean;
}

const DIRECTORY_PREFIX = 'audit-trail-private-';
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

const live = new Set<PrivateServer>();

export abstract class PrivateServer {
  /** The server's files: its data, its log (server.log) and its Unix sockets. */
  readonly directory: string;
  readonly kind: string;
  readonly port: number;
  private child: ChildProcess | undefined;
  private processGroup = false;
  private exited: Promise<unknown> | undefined;

  protected constructor(kind: string, port: number) {
    this.kind = kind;
    this.port = port;
    sweepAbandonedDirectories();
    installExitHooks();
    // The owner's PID in the name tells a later run whether the directory was abandoned.
    this.directory = mkdtempSync(join(tmpdir(), `${DIRECTORY_PREFIX}${kind}-${process.pid}-`));
    live.add(this);
  }

  /** The URL a client (or the service under test) connects to. */
  abstract readonly url: string;
  /** Signals for a clean stop and for a crash. */
  protected abstract readonly signals: Readonly<Record<StopMode, NodeJS.Signals>>;
  protected abstract launch(): Launch;
  /** Whether the server serves clients yet. */
  protected abstract answers(): Promise<boolean>;
  /** How long start() waits for it to answer. */
  protected readonly startTimeoutMs: number = START_TIMEOUT_MS;

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts the server on its port and data (again, after a stop) and waits until it serves clients. */
  async start(): Promise<void> {
    if (this.child) return;
    const { command, args, user, env, processGroup } = this.launch();
    this.processGroup = processGroup === true;
    const log = openSync(join(this.directory, 'server.log'), 'a');
    const child = spawn(command, args, {
      cwd: this.directory,
      stdio: ['ignore', log, log],
      uid: user?.uid,
      gid: user?.gid,
      detached: this.processGroup,
      ...(env ? { env: { ...process.env, ...env } } : {}),
    });
    closeSync(log);
    this.child = child;
    let failure: string | undefined;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        failure ??= `exited (${signal ?? code})`;
        resolve(failure);
      });
      // Only when it could not be started at all, e.g. ENOENT.
      child.once('error', (error) => {
        failure ??= error.message;
        resolve(failure);
      });
    });
    const deadline = Date.now() + this.startTimeoutMs;
    while (!(await this.answers())) {
      if (failure !== undefined || Date.now() > deadline) {
        await this.stop('crash');
        throw new Error(`Private ${this.kind} on port ${this.port} did not start (${failure ?? 'timed out'}):\n${this.logTail()}`);
      }
      // The interval of a wait on a condition (the server answers, or failed), not a fixed sleep.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Stops the server by its PID and waits until it has exited. Its data stays for a later start(). */
  async stop(mode: StopMode = 'clean'): Promise<void> {
    const child = this.child;
    if (!child) return;
    // A crash takes the whole group: a supervisor's children (Postgres under pg_autoctl) die with it.
    if (mode === 'crash' && this.processGroup) killGroup(child.pid!, this.directory);
    else child.kill(this.signals[mode]);
    // A bound, not a sleep: the exit is awaited, and a server still running after STOP_TIMEOUT_MS is killed.
    const timedOut = Symbol('timed out');
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([this.exited, new Promise((resolve) => (timer = setTimeout(resolve, STOP_TIMEOUT_MS, timedOut)))]);
    clearTimeout(timer);
    if (outcome === timedOut) {
      if (this.processGroup) killGroup(child.pid!, this.directory);
      else child.kill('SIGKILL');
      await this.exited;
    }
    this.child = undefined;
  }

  /** The server's own log, for assertions about what it refused. */
  log(): string {
    return readFileSync(join(this.directory, 'server.log'), 'utf8');
  }

  /** Stops the server if it runs and deletes its directory. */
  async remove(): Promise<void> {
    await this.stop('crash');
    rmSync(this.directory, { recursive: true, force: true });
    live.delete(this);
  }

  /** remove() for an exit hook, where nothing asynchronous runs any more. */
  removeNow(): void {
    const pid = this.child?.pid;
    if (pid !== undefined) {
      if (this.processGroup) killGroup(pid, this.directory);
      killAndWait(pid, this.signals.crash);
      this.child = undefined;
    }
    rmSync(this.directory, { recursive: true, force: true });
    live.delete(this);
  }

  private logTail(): string {
    try {
      return this.log().split('\n').slice(-20).join('\n');
    } catch {
      return '(no log)';
    }
  }
}

export interface PrivatePostgresOptions {
  /** Server settings, as `-c name=value` (max_connections, say). */
  readonly settings?: Readonly<Record<string, string>>;
  /** ssl=on, and connections over TCP without TLS refused. */
  readonly tls?: ServerTls & {
    /** Roles (created as superusers) that must present a client certificate signed by the CA. */
    readonly clientCertRoles?: readonly string[];
  };
}

/** A Postgres cluster of its own (initdb), trust authentication for user postgres on 127.0.0.1. */
export class PrivatePostgres extends PrivateServer {
  protected readonly signals = { clean: 'SIGINT', crash: 'SIGQUIT' } as const; // fast and immediate shutdown
  private readonly binaries: string;
  private readonly user: { uid: number; gid: number } | undefined;
  private readonly options: PrivatePostgresOptions;

  private constructor(port: number, binaries: string, user: { uid: number; gid: number } | undefined, options: PrivatePostgresOptions) {
    super('postgres', port);
    this.binaries = binaries;
    this.user = user;
    this.options = options;
  }

  static async start(options: PrivatePostgresOptions = {}): Promise<PrivatePostgres> {
    const server = new PrivatePostgres(await freePort(), postgresBinaries(), postgresUser(), options);
    try {
      if (server.user) chownSync(server.directory, server.user.uid, server.user.gid);
      await promisify(execFile)(
        join(server.binaries, 'initdb'),
        ['-D', server.dataDirectory, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-sync'],
        { cwd: server.directory, uid: server.user?.uid, gid: server.user?.gid },
      );
      if (options.tls) server.configureTls(options.tls);
      await server.start();
      for (const role of options.tls?.clientCertRoles ?? [])
        await server.overSocket(`CREATE ROLE ${pg.escapeIdentifier(role)} LOGIN SUPERUSER`);
      return server;
    } catch (error) {
      await server.remove();
      throw error;
    }
  }

  /** The server's URL without a database; append `/name`. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}`;
  }

  private get dataDirectory(): string {
    return join(this.directory, 'data');
  }

  private get tlsDirectory(): string {
    return join(this.directory, 'tls');
  }

  /** Copies the certificate files where only the server's user may read them (Postgres insists), and pg_hba.conf. */
  private configureTls(tls: NonNullable<PrivatePostgresOptions['tls']>): void {
    mkdirSync(this.tlsDirectory, { mode: 0o700 });
    const files = { 'server.crt': tls.pki.server.certFile, 'server.key': tls.pki.server.keyFile, 'ca.crt': tls.pki.caFile };
    for (const [name, source] of Object.entries(files)) writeFileSync(join(this.tlsDirectory, name), readFileSync(source), { mode: 0o600 });
    if (this.user) for (const name of ['', ...Object.keys(files)]) chownSync(join(this.tlsDirectory, name), this.user.uid, this.user.gid);
    const clientCertificate = tls.verifyClients ? ' clientcert=verify-ca' : '';
    writeFileSync(
      join(this.dataDirectory, 'pg_hba.conf'),
      [
        'local all all trust',
        ...(tls.clientCertRoles ?? []).map((role) => `hostssl all ${role} 127.0.0.1/32 trust clientcert=verify-ca`),
        `hostssl all all 127.0.0.1/32 trust${clientCertificate}`,
        'hostnossl all all 0.0.0.0/0 reject',
        '',
      ].join('\n'),
    );
  }

  /** A statement as the superuser over the Unix socket, which needs no TLS. */
  private async overSocket(sql: string): Promise<void> {
    const client = new pg.Client({
      host: this.directory,
      port: this.port,
      user: 'postgres',
      database: 'postgres',
      connectionTimeoutMillis: 2000,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query(sql);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  protected launch(): Launch {
    return {
      command: join(this.binaries, 'postgres'),
      args: [
        '-D',
        this.dataDirectory,
        '-p',
        String(this.port),
        '-k',
        this.directory,
        '-c',
        'listen_addresses=127.0.0.1',
        // Only a process crash is ever simulated, never the machine's: the page cache keeps what fsync would.
        '-c',
        'fsync=off',
        '-c',
        'full_page_writes=off',
        ...Object.entries(this.options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
        ...(this.options.tls
          ? [
              '-c',
              'ssl=on',
              '-c',
              `ssl_cert_file=${join(this.tlsDirectory, 'server.crt')}`,
              '-c',
              `ssl_key_file=${join(this.tlsDirectory, 'server.key')}`,
              '-c',
              `ssl_ca_file=${join(this.tlsDirectory, 'ca.crt')}`,
            ]
          : []),
      ],
      user: this.user,
    };
  }

  protected async answers(): Promise<boolean> {
    // With TLS, TCP without it is refused: ask over the Unix socket instead.
    const client = this.options.tls
      ? new pg.Client({ host: this.directory, port: this.port, user: 'postgres', database: 'postgres', connectionTimeoutMillis: 2000 })
      : new pg.Client({ connectionString: `${this.url}/postgres`, connectionTimeoutMillis: 2000 });
    return postgresAnswers(client);
  }
}

/**
 * Whether a Postgres answers a query on `client` (which it then closes): false while it is refused
 * ("the database system is starting up") or not listening yet.
 */
export async function postgresAnswers(client: pg.Client): Promise<boolean> {
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface PrivateNatsOptions {
  readonly tls?: ServerTls;
  /** More of the server's configuration: accounts, an operator (natsOperatorSetup in test-pki.ts). */
  readonly extraConfig?: string;
  /** A node of a JetStream cluster (startNatsCluster). */
  readonly cluster?: { readonly name: string; readonly node: string; readonly routePort: number; readonly routes: readonly number[] };
}

/** A NATS server with JetStream and a store directory of its own. */
export class PrivateNats extends PrivateServer {
  protected readonly signals = { clean: 'SIGTERM', crash: 'SIGKILL' } as const;
  private readonly options: PrivateNatsOptions;

  private constructor(port: number, options: PrivateNatsOptions) {
    super('nats', port);
    this.options = options;
  }

  static async start(options: PrivateNatsOptions = {}, port?: number): Promise<PrivateNats> {
    const server = new PrivateNats(port ?? (await freePort()), options);
    await startOrRemove(server);
    return server;
  }

  get url(): string {
    return `${this.options.tls ? 'tls' : 'nats'}://127.0.0.1:${this.port}`;
  }

  protected launch(): Launch {
    const { tls, extraConfig, cluster } = this.options;
    if (!tls && extraConfig === undefined && !cluster) {
      return { command: 'nats-server', args: ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', join(this.directory, 'store')] };
    }
    const quoted = (text: string) => JSON.stringify(text);
    const lines = [
      'host: 127.0.0.1',
      `port: ${this.port}`,
      `jetstream: {store_dir: ${quoted(join(this.directory, 'store'))}}`,
      ...(tls
        ? [
            'tls: {',
            `  cert_file: ${quoted(tls.pki.server.certFile)}`,
            `  key_file: ${quoted(tls.pki.server.keyFile)}`,
            `  ca_file: ${quoted(tls.pki.caFile)}`,
            `  verify: ${tls.verifyClients === true}`,
            '  timeout: 5',
            '}',
          ]
        : []),
      ...(cluster
        ? [
            `server_name: ${cluster.node}`,
            `cluster: {name: ${cluster.name}, host: 127.0.0.1, port: ${cluster.routePort}, routes: [${cluster.routes.map((route) => `nats-route://127.0.0.1:${route}`).join(', ')}]}`,
          ]
        : []),
      extraConfig ?? '',
    ];
    const configFile = join(this.directory, 'nats.conf');
    writeFileSync(configFile, lines.join('\n'));
    return { command: 'nats-server', args: ['-c', configFile] };
  }

  protected answers(): Promise<boolean> {
    return portAnswers(this.port);
  }
}

export interface PrivateRedisOptions {
  /** Only a TLS port (the Debian build of redis-server links OpenSSL). */
  readonly tls?: ServerTls;
}

/** A Redis server that keeps nothing on disk. */
export class PrivateRedis extends PrivateServer {
  protected readonly signals = { clean: 'SIGTERM', crash: 'SIGKILL' } as const;
  private readonly options: PrivateRedisOptions;

  private constructor(port: number, options: PrivateRedisOptions) {
    super('redis', port);
    this.options = options;
  }

  static async start(options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
    const server = new PrivateRedis(await freePort(), options);
    await startOrRemove(server);
    return server;
  }

  get url(): string {
    return `${this.options.tls ? 'rediss' : 'redis'}://127.0.0.1:${this.port}`;
  }

  protected launch(): Launch {
    const { tls } = this.options;
    const listen = tls
      ? [
          '--port',
          '0',
          '--tls-port',
          String(this.port),
          '--tls-cert-file',
          tls.pki.server.certFile,
          '--tls-key-file',
          tls.pki.server.keyFile,
          '--tls-ca-cert-file',
          tls.pki.caFile,
          '--tls-auth-clients',
          tls.verifyClients ? 'yes' : 'no',
        ]
      : ['--port', String(this.port)];
    return {
      command: 'redis-server',
      args: [...listen, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.directory],
    };
  }

  protected answers(): Promise<boolean> {
    return portAnswers(this.port);
  }
}

export interface PrivateNatsCluster {
  /** Every node's client URL, comma-separated, as NATS_URL takes them. */
  readonly url: string;
  readonly nodes: readonly PrivateNats[];
  remove(): Promise<void>;
}

/** A JetStream cluster of `size` private NATS servers routed to each other on loopback. */
export async function startNatsCluster(size = 3): Promise<PrivateNatsCluster> {
  const clientPorts: number[] = [];
  const routePorts: number[] = [];
  while (clientPorts.length < size) {
    const [client, route] = [await freePort(), await freePort()];
    if (new Set([...clientPorts, ...routePorts, client, route]).size === 2 * (clientPorts.length + 1)) {
      clientPorts.push(client);
      routePorts.push(route);
    }
  }
  // All at once: each node waits for its routes before JetStream elects a leader.
  const started = await Promise.allSettled(
    clientPorts.map((port, index) =>
      PrivateNats.start(
        {
          cluster: {
            name: 'audit-trail-test',
            node: `node${index + 1}`,
            routePort: routePorts[index]!,
            routes: routePorts.filter((_, other) => other !== index),
          },
        },
        port,
      ),
    ),
  );
  const nodes = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const remove = async () => {
    await Promise.all(nodes.map((node) => node.remove()));
  };
  const failure = started.find((result) => result.status === 'rejected');
  if (failure) {
    await remove();
    throw (failure as PromiseRejectedResult).reason;
  }
  return { url: nodes.map((node) => node.url).join(','), nodes, remove };
}

export async function startOrRemove(server: PrivateServer): Promise<void> {
  try {
    await server.start();
  } catch (error) {
    await server.remove();
    throw error;
  }
}

export function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The directory of initdb and postgres: pg_config's, else the newest under /usr/lib/postgresql (Debian). */
function postgresBinaries(): string {
  const candidates: string[] = [];
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim());
  } catch {
    // No pg_config (it comes with libpq-dev on Debian).
  }
  if (existsSync('/usr/lib/postgresql')) {
    const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((version) => `/usr/lib/postgresql/${version}/bin`));
  }
  const found = candidates.find((dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres')));
  if (!found) throw new Error('No PostgreSQL server binaries (initdb, postgres) found; install postgresql');
  return found;
}

/** Postgres refuses to run as root: as root, run it as the postgres OS user. */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** Gone or a zombie: a child that exited but that the event loop (not running in an exit hook) did not reap. */
function processGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/**
 * Kills the process group led by `leader` (a server started with `processGroup`) and every process still
 * working in the server's directory. Postgres makes each of its children a session leader of its own, so the
 * group's signal reaches the supervisor and the postmaster only: backends end with their postmaster, but
 * pg_auto_failover's health-check worker does not, and it kept the monitor's logger alive after the run.
 */
function killGroup(leader: number, directory: string): void {
  try {
    process.kill(-leader, 'SIGKILL');
  } catch {
    // The group is gone already.
  }
  for (const pid of processesWorkingIn([directory])) killAndWait(pid, 'SIGKILL');
}

/** Processes whose working directory is one of `directories` or below it (a server's directory is its own). */
function processesWorkingIn(directories: readonly string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let cwd: string;
    try {
      cwd = readlinkSync(`/proc/${entry}/cwd`);
    } catch {
      continue;
    }
    if (directories.some((directory) => cwd === directory || cwd.startsWith(`${directory}/`))) pids.push(Number(entry));
  }
  return pids;
}

function killAndWait(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    return;
  }
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let waited = 0; !processGone(pid); waited += 20) {
    if (waited === 5_000) process.kill(pid, 'SIGKILL');
    if (waited > 10_000) return;
    Atomics.wait(pause, 0, 0, 20);
  }
}

let exitHooksInstalled = false;

function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  const removeAll = () => {
    for (const server of [...live]) server.removeNow();
  };
  process.on('exit', removeAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      removeAll();
      // Then die of the signal as if no one had listened.
      process.kill(process.pid, signal);
    });
  }
}

let swept = false;

/**
 * Removes directories whose run was killed before its exit hook could run, and kills the servers still
 * working in them (a server's working directory is its own directory). A directory whose owner lives
 * belongs to a run going on beside us and is left alone.
 */
function sweepAbandonedDirectories(): void {
  if (swept) return;
  swept = true;
  const pattern = new RegExp(`^${DIRECTORY_PREFIX}[a-z]+-(\\d+)-`);
  const abandoned = readdirSync(tmpdir())
    .filter((name) => {
      const owner = pattern.exec(name)?.[1];
      return owner !== undefined && processGone(Number(owner));
    })
    .map((name) => join(tmpdir(), name));
  if (abandoned.length === 0) return;
  for (const pid of processesWorkingIn(abandoned)) killAndWait(pid, 'SIGKILL');
  for (const directory of abandoned) rmSync(directory, { recursive: true, force: true });
}
