import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createAccount, createOperator, createUser, type KeyPair as NKeyPair } from '@nats-io/nkeys';
import { freePort } from './ports.ts';
import { waitFor } from './wait.ts';

/**
 * Private instances of Postgres, Redis and NATS, set up as production runs them (TLS with a private CA,
 * client certificates, NATS credentials, a three-node JetStream cluster), for tests of how the service
 * connects to them. Each server runs as a child of the test process on a free loopback port with a directory
 * of its own; stop() kills exactly that process by its PID and removes the directory. The machine's shared
 * services are never touched.
 */

const run = promisify(execFile);

export interface CertificateFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

/** A throw-away CA with a server certificate for localhost/127.0.0.1 and a client certificate. */
export interface TestPki {
  readonly caFile: string;
  readonly server: CertificateFiles;
  /** Signed by the CA for clientAuth, with the common name given to createTestPki. */
  readonly client: CertificateFiles;
  /** A second, unrelated CA: trusting it instead of the right one must fail. */
  readonly otherCaFile: string;
  remove(): void;
}

export async function createTestPki(clientName = 'audit-trail'): Promise<TestPki> {
  const dir = mkdtempSync(join(tmpdir(), 'audit-trail-depsrv-pki-'));
  const file = (name: string) => join(dir, name);
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const selfSignedCa = async (name: string, subject: string) =>
    run('openssl', ['req', '-x509', ...newKey, '-keyout', file(`${name}.key`), '-out', file(`${name}.crt`), '-days', '2', '-subj', subject,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  const signed = async (name: string, subject: string, extensions: string) => {
    writeFileSync(file(`${name}.ext`), extensions);
    await run('openssl', ['req', ...newKey, '-keyout', file(`${name}.key`), '-out', file(`${name}.csr`), '-subj', subject]);
    await run('openssl', ['x509', '-req', '-in', file(`${name}.csr`), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial',
      '-out', file(`${name}.crt`), '-days', '2', '-extfile', file(`${name}.ext`)]);
  };
  try {
    await selfSignedCa('ca', '/CN=audit-trail test CA');
    await selfSignedCa('other-ca', '/CN=some other CA');
    await signed('server', '/CN=localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
    await signed('client', `/CN=${clientName}`, 'extendedKeyUsage=clientAuth\n');
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    caFile: file('ca.crt'),
    otherCaFile: file('other-ca.crt'),
    server: { certFile: file('server.crt'), keyFile: file('server.key') },
    client: { certFile: file('client.crt'), keyFile: file('client.key') },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface PrivateServer {
  readonly port: number;
  readonly pid: number;
  /** The server's own log, for assertions and for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

interface ServerProcess {
  readonly command: string;
  readonly args: readonly string[];
  readonly port: number;
  /** Removed on stop; holds the log file. */
  readonly dir: string;
  /** Run as this OS user (Postgres refuses to run as root). */
  readonly user?: string;
  /** Ready when this resolves true; by default when the port accepts connections. */
  readonly ready?: () => Promise<boolean>;
}

// Every private server still running, killed by PID if the test process exits without stopping them.
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** Starts one server process, waits until it is ready, and returns how to stop it (by PID) and clean up. */
export async function startPrivateServer(spec: ServerProcess): Promise<PrivateServer> {
  const logFile = join(spec.dir, 'server.log');
  writeFileSync(logFile, '');
  const identity = spec.user === undefined ? undefined : osUser(spec.user);
  if (identity !== undefined) chownSync(logFile, identity.uid, identity.gid);
  const output = openSync(logFile, 'a');
  const child = spawn(spec.command, spec.args, { stdio: ['ignore', output, output], cwd: spec.dir, ...identity });
  running.add(child);
  let exited = false;
  const exit = new Promise<void>((resolve) => child.once('exit', () => ((exited = true), running.delete(child), resolve())));
  const log = () => readFileSync(logFile, 'utf8');
  const stop = async () => {
    if (!exited) {
      child.kill('SIGKILL');
      await exit;
    }
    rmSync(spec.dir, { recursive: true, force: true });
  };
  try {
    const ready = spec.ready ?? (() => portOpen(spec.port));
    await waitFor(async () => {
      if (exited) throw new Error(`${spec.command} exited at start:\n${log()}`);
      return ready();
    }, `${spec.command} on port ${spec.port}`, 30_000, 100);
  } catch (error) {
    await stop();
    throw error;
  }
  return { port: spec.port, pid: child.pid!, log, stop };
}

function osUser(name: string): { uid: number; gid: number } {
  const [uid, gid] = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, name], { encoding: 'utf8' }).trim()));
  return { uid: uid!, gid: gid! };
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function serverDirectory(kind: string): string {
  return mkdtempSync(join(tmpdir(), `audit-trail-depsrv-${kind}-`));
}

export interface NatsTlsOptions {
  readonly pki: TestPki;
  /** Require and verify a client certificate (--tlsverify). */
  readonly verifyClients?: boolean;
  /** A server configuration file's text instead of flags (accounts, operators, credentials). */
  readonly extraConfig?: string;
}

/** nats-server with JetStream, accepting only TLS connections with the test server certificate. */
export async function startTlsNats(options: NatsTlsOptions): Promise<PrivateServer & { url: string }> {
  const port = await freePort();
  const dir = serverDirectory('nats');
  const configFile = join(dir, 'nats.conf');
  writeFileSync(
    configFile,
    [
      'host: 127.0.0.1',
      `port: ${port}`,
      `jetstream: {store_dir: ${JSON.stringify(join(dir, 'jetstream'))}}`,
      'tls: {',
      `  cert_file: ${JSON.stringify(options.pki.server.certFile)}`,
      `  key_file: ${JSON.stringify(options.pki.server.keyFile)}`,
      `  ca_file: ${JSON.stringify(options.pki.caFile)}`,
      `  verify: ${options.verifyClients === true}`,
      '  timeout: 5',
      '}',
      options.extraConfig ?? '',
    ].join('\n'),
  );
  const server = await startPrivateServer({ command: 'nats-server', args: ['-c', configFile], port, dir });
  return { ...server, url: `tls://127.0.0.1:${port}` };
}

export interface RedisTlsOptions {
  readonly pki: TestPki;
  /** Require a client certificate signed by the CA (tls-auth-clients yes). */
  readonly verifyClients?: boolean;
}

/** redis-server listening only on a TLS port (--port 0). The Debian build links OpenSSL. */
export async function startTlsRedis(options: RedisTlsOptions): Promise<PrivateServer & { url: string }> {
  const port = await freePort();
  const dir = serverDirectory('redis');
  const args = [
    '--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1',
    '--tls-cert-file', options.pki.server.certFile, '--tls-key-file', options.pki.server.keyFile,
    '--tls-ca-cert-file', options.pki.caFile, '--tls-auth-clients', options.verifyClients ? 'yes' : 'no',
    '--save', '', '--appendonly', 'no', '--dir', dir,
  ];
  const server = await startPrivateServer({ command: 'redis-server', args, port, dir });
  return { ...server, url: `rediss://127.0.0.1:${port}` };
}

export interface PostgresTlsOptions {
  readonly pki: TestPki;
  /** Roles that must present a client certificate signed by the CA (clientcert=verify-ca). */
  readonly clientCertRoles?: readonly string[];
}

const POSTGRES_BIN = '/usr/lib/postgresql/15/bin';

/**
 * A Postgres cluster of its own (initdb, then postgres as the postgres OS user) with ssl=on that refuses
 * connections without TLS. Trust authentication over TLS; the roles in clientCertRoles exist and must also
 * present a client certificate.
 */
export async function startTlsPostgres(options: PostgresTlsOptions): Promise<PrivateServer & { url(user?: string, database?: string): string }> {
  const port = await freePort();
  const dir = serverDirectory('postgres');
  const data = join(dir, 'data');
  const postgres = osUser('postgres');
  chownSync(dir, postgres.uid, postgres.gid);
  // Postgres accepts a key file only when its owner runs the server and nobody else may read it.
  const tls = join(dir, 'tls');
  mkdirSync(tls, { mode: 0o700 });
  for (const [name, source] of [['server.crt', options.pki.server.certFile], ['server.key', options.pki.server.keyFile], ['ca.crt', options.pki.caFile]] as const) {
    writeFileSync(join(tls, name), readFileSync(source), { mode: 0o600 });
    chownSync(join(tls, name), postgres.uid, postgres.gid);
  }
  chownSync(tls, postgres.uid, postgres.gid);
  try {
    await run(`${POSTGRES_BIN}/initdb`, ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'], { ...postgres, cwd: dir });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const certRoles = options.clientCertRoles ?? [];
  writeFileSync(
    join(data, 'pg_hba.conf'),
    [
      'local all all trust',
      ...certRoles.map((role) => `hostssl all ${role} 127.0.0.1/32 trust clientcert=verify-ca`),
      'hostssl all all 127.0.0.1/32 trust',
      'hostnossl all all 0.0.0.0/0 reject',
      '',
    ].join('\n'),
  );
  const args = [
    '-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'ssl=on',
    '-c', `ssl_cert_file=${join(tls, 'server.crt')}`, '-c', `ssl_key_file=${join(tls, 'server.key')}`, '-c', `ssl_ca_file=${join(tls, 'ca.crt')}`,
    '-c', 'fsync=off', '-c', 'max_connections=40',
  ];
  const server = await startPrivateServer({
    command: `${POSTGRES_BIN}/postgres`,
    args,
    port,
    dir,
    user: 'postgres',
    ready: async () => run(`${POSTGRES_BIN}/pg_isready`, ['-q', '-h', dir, '-p', String(port)]).then(() => true, () => false),
  });
  const psql = (sql: string) => run(`${POSTGRES_BIN}/psql`, ['-h', dir, '-p', String(port), '-U', 'postgres', '-v', 'ON_ERROR_STOP=1', '-c', sql], postgres);
  try {
    for (const role of certRoles) await psql(`CREATE ROLE "${role}" LOGIN SUPERUSER`);
    await psql('CREATE DATABASE audit_trail');
  } catch (error) {
    await server.stop();
    throw error;
  }
  return { ...server, url: (user = 'postgres', database = 'audit_trail') => `postgres://${user}@127.0.0.1:${port}/${database}` };
}

/** A NATS operator with one account and one user, as nsc would set them up: the server's side and the user's. */
export interface NatsOperatorSetup {
  /** Lines for the server's configuration (operator, system account, preloaded account JWTs). */
  readonly serverConfig: string;
  /** The text of a .creds file for the user. */
  readonly userCreds: string;
  /** The same user's JWT with another user's seed: a credentials file the server must refuse. */
  readonly forgedCreds: string;
}

/** JWTs signed with NKeys the way nsc signs them (header, claims and an ed25519 signature, base64url). */
export function natsOperatorSetup(): NatsOperatorSetup {
  const b64 = (data: Uint8Array | string) => Buffer.from(data).toString('base64url');
  const jwt = (issuer: NKeyPair, subject: string, name: string, nats: object) => {
    const header = b64(JSON.stringify({ typ: 'JWT', alg: 'ed25519-nkey' }));
    const claims = b64(
      JSON.stringify({ jti: b64(randomBytes(16)), iat: Math.floor(Date.now() / 1000), iss: issuer.getPublicKey(), name, sub: subject, nats: { ...nats, version: 2 } }),
    );
    return `${header}.${claims}.${b64(issuer.sign(Buffer.from(`${header}.${claims}`)))}`;
  };
  const operator = createOperator();
  const system = createAccount();
  const account = createAccount();
  const user = createUser();
  const unlimited = { subs: -1, data: -1, payload: -1, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1 };
  const userJwt = jwt(account, user.getPublicKey(), 'audit-trail', { type: 'user', pub: {}, sub: {}, subs: -1, data: -1, payload: -1 });
  const creds = (seed: Uint8Array) =>
    `-----BEGIN NATS USER JWT-----\n${userJwt}\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n${Buffer.from(seed).toString()}\n------END USER NKEY SEED------\n`;
  return {
    serverConfig: [
      `operator: ${jwt(operator, operator.getPublicKey(), 'test-operator', { type: 'operator', system_account: system.getPublicKey() })}`,
      `system_account: ${system.getPublicKey()}`,
      'resolver: MEMORY',
      'resolver_preload: {',
      `  ${system.getPublicKey()}: ${jwt(operator, system.getPublicKey(), 'SYS', { type: 'account', limits: unlimited })}`,
      `  ${account.getPublicKey()}: ${jwt(operator, account.getPublicKey(), 'audit', { type: 'account', limits: { ...unlimited, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 } })}`,
      '}',
    ].join('\n'),
    userCreds: creds(user.getSeed()),
    forgedCreds: creds(createUser().getSeed()),
  };
}

export interface NatsCluster {
  /** Every node's client URL, comma-separated, as NATS_URL takes them. */
  readonly url: string;
  readonly nodes: readonly PrivateServer[];
  stop(): Promise<void>;
}

/** A JetStream cluster of `size` nats-server processes routed to each other on loopback. */
export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  const clientPorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const routePorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const nodes: PrivateServer[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stop()));
  };
  try {
    // All at once: a node waits for its routes to form a quorum before it is of any use.
    const started = await Promise.allSettled(
      clientPorts.map(async (port, index) => {
        const dir = serverDirectory('nats-cluster');
        const configFile = join(dir, 'nats.conf');
        writeFileSync(
          configFile,
          [
            `server_name: node${index + 1}`,
            'host: 127.0.0.1',
            `port: ${port}`,
            `jetstream: {store_dir: ${JSON.stringify(join(dir, 'jetstream'))}}`,
            'cluster: {',
            '  name: audit-trail-test',
            '  host: 127.0.0.1',
            `  port: ${routePorts[index]}`,
            `  routes: [${routePorts.filter((_, other) => other !== index).map((route) => `nats-route://127.0.0.1:${route}`).join(', ')}]`,
            '}',
          ].join('\n'),
        );
        const node = await startPrivateServer({ command: 'nats-server', args: ['-c', configFile], port, dir });
        nodes.push(node);
        return node;
      }),
    );
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: clientPorts.map((port) => `nats://127.0.0.1:${port}`).join(','), nodes, stop };
}
