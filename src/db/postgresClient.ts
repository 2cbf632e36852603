import pg from 'pg';
import { parsePostgresUrl, type PostgresHost, type PostgresUrl } from '../config/postgresUrl.ts';

/**
 * The one way the service opens a Postgres connection (the pools, each LISTEN connection, the migrator), so
 * that two things node-postgres leaves out hold for all of them:
 *
 * - **Several hosts** (config/postgresUrl.ts): each new connection goes to the host last found to be the
 *   primary; when that one refuses, or answers read-only, the hosts are probed again and the first that
 *   accepts writes is used, so a failover of Patroni, pg_auto_failover or a cloud service needs no restart.
 *   With no writable host the connection fails as an unreachable database does (a 503 for callers).
 * - **A pooler in transaction mode** (PgBouncer before 1.21 keeps no prepared statements and refuses startup
 *   parameters it does not know): statements go unnamed, and statement_timeout and lock_timeout are not sent
 *   at start (they are then the role's settings: docs/operations.md "Poolers").
 */

export type DatabasePooler = 'none' | 'transaction';

/** No host of the URL accepts writes: during a failover, until the formation has promoted a standby. */
export class NoWritablePostgresError extends Error {
  override name = 'NoWritablePostgresError';
}

export interface PostgresConnection {
  /** A pg.Client class that connects where the URL says; pass it to pg.Pool as `Client`. */
  readonly Client: typeof pg.Client;
  /** The URL for the first host, for what node-postgres parses itself (credentials, TLS, database). */
  readonly connectionString: string;
}

const PROBE_TIMEOUT_MS = 2_000;
/** Startup parameters PgBouncer 1.18 refuses ("unsupported startup parameter"). */
const SESSION_SETTINGS = ['statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout'] as const;

// One per URL and pooler for the process: every pool of it learns of a failover from the first that sees it.
const connections = new Map<string, PostgresConnection>();

export function postgresConnection(url: string, pooler: DatabasePooler = 'none'): PostgresConnection {
  const key = `${pooler} ${url}`;
  let connection = connections.get(key);
  if (!connection) {
    const target = parsePostgresUrl(url);
    connection = { Client: clientClass(target, new PrimaryLocator(target), pooler), connectionString: target.urlFor(target.hosts[0]!) };
    connections.set(key, connection);
  }
  return connection;
}

/** A plain client of the URL (a LISTEN connection, the migrator's). */
export function postgresClient(url: string, config: Omit<pg.ClientConfig, 'connectionString'> = {}): pg.Client {
  const { Client, connectionString } = postgresConnection(url);
  return new Client({ ...config, connectionString });
}

/** Which host new connections go to: the one last found writable, else the first that answers the probe. */
class PrimaryLocator {
  private readonly target: PostgresUrl;
  private known: PostgresHost | undefined;
  private probing: Promise<PostgresHost> | undefined;

  constructor(target: PostgresUrl) {
    this.target = target;
    if (target.hosts.length === 1) this.known = target.hosts[0];
  }

  host(): Promise<PostgresHost> {
    if (this.known) return Promise.resolve(this.known);
    this.probing ??= this.probe().finally(() => (this.probing = undefined));
    return this.probing;
  }

  /** The host refused or answered read-only: the next connection probes them all. */
  forget(host: PostgresHost): void {
    if (this.known === host && this.target.hosts.length > 1) this.known = undefined;
  }

  private async probe(): Promise<PostgresHost> {
    const answers = await Promise.all(this.target.hosts.map((host) => this.accepts(host).catch(() => false)));
    const index = answers.indexOf(true);
    if (index < 0) {
      const wanted = this.target.readWrite ? 'accepts writes' : 'answers';
      throw new NoWritablePostgresError(
        `No host of the database URL ${wanted} (${this.target.hosts.length} tried); a failover may be under way`,
      );
    }
    this.known = this.target.hosts[index];
    return this.known!;
  }

  private async accepts(host: PostgresHost): Promise<boolean> {
    const client = new pg.Client({ connectionString: this.target.urlFor(host), connectionTimeoutMillis: PROBE_TIMEOUT_MS });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return !this.target.readWrite || (await readOnly(client)) === false;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

/** What libpq asks for target_session_attrs=read-write. */
async function readOnly(client: pg.Client): Promise<boolean> {
  const { rows } = await client.query<{ transaction_read_only: string }>('SHOW transaction_read_only');
  return rows[0]?.transaction_read_only !== 'off';
}

// biome-ignore lint/suspicious/noExplicitAny: node-postgres calls it (error) or (null, client)
type Callback = (...outcome: any[]) => void;

function clientClass(target: PostgresUrl, locator: PrimaryLocator, pooler: DatabasePooler): typeof pg.Client {
  const mustCheckWrites = target.readWrite;
  const pooled = pooler === 'transaction';
  class PostgresClient extends pg.Client {
    constructor(config?: string | pg.ClientConfig) {
      const options: Record<string, unknown> = typeof config === 'string' ? { connectionString: config } : { ...config };
      if (pooled) for (const setting of SESSION_SETTINGS) delete options[setting];
      super(options as pg.ClientConfig);
      // A failover ends connections at any moment, also between a checkout and its first listener (seen in
      // bench/failover.ts: an unhandled 'error' ended the process). The error also reaches the statement in
      // flight or ends the connection, which the pool and the listeners handle and log: here it must not crash.
      this.on('error', () => undefined);
    }

    // biome-ignore lint/suspicious/noExplicitAny: node-postgres' overloads (promise or callback) in one body
    override connect(callback?: Callback): any {
      const connected = this.connectToTarget();
      if (!callback) return connected;
      connected.then(
        () => callback(null, this),
        (error: Error) => callback(error),
      );
      return undefined;
    }

    private async connectToTarget(): Promise<this> {
      const host = await locator.host();
      if (host.host !== '') {
        const parameters = (this as unknown as { connectionParameters: { host: string; port: number } }).connectionParameters;
        this.host = parameters.host = host.host;
        this.port = parameters.port = host.port;
      }
      try {
        await super.connect();
      } catch (error) {
        locator.forget(host);
        throw error;
      }
      if (mustCheckWrites && (await readOnly(this).catch(() => true))) {
        locator.forget(host);
        await this.end().catch(() => undefined);
        throw new NoWritablePostgresError(`${host.host}:${host.port} is read-only now (a standby); a failover may be under way`);
      }
      return this;
    }

    // biome-ignore lint/suspicious/noExplicitAny: passes node-postgres' overloads through unchanged
    override query(...args: any[]): any {
      const [first] = args;
      // A pooler in transaction mode may run the next statement on another server connection, which never
      // saw the name prepared: every statement goes unnamed (parsed and planned each time).
      if (pooled && typeof first === 'object' && first !== null && typeof first.submit !== 'function' && first.name !== undefined) {
        const { name: _unnamed, ...unnamed } = first;
        args[0] = unnamed;
      }
      // biome-ignore lint/suspicious/noExplicitAny: see above
      return (super.query as (...rest: any[]) => any)(...args);
    }
  }
  return PostgresClient;
}
