import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './ports.ts';
import { type Launch, PrivateServer, postgresAnswers } from './private-services.ts';
import { waitFor } from './wait.ts';

/**
 * A pg_auto_failover formation of the test's own (Debian postgresql-15-auto-failover): a monitor, a primary
 * and a synchronous standby, each a `pg_autoctl` keeper supervising its Postgres on a free port of loopback.
 * Chosen over Patroni with etcd because it is one package and three processes, and because its standby is
 * synchronous by default (ANY 1), which is what makes "0 acknowledged events missing" a property of the
 * formation rather than luck; Patroni's own synchronous mode would do as well, with an etcd cluster besides.
 *
 * A node's crash is SIGKILL to its keeper's process group (the keeper, its services and Postgres), as a
 * machine's death would be; the monitor then promotes the standby. Timings are the monitor's settings made
 * short for a test (health checks every second, a node unhealthy after 5 s, a primary presumed demoted after
 * 5 s): production defaults are 5 s, 20 s and 30 s (docs/operations.md "High availability").
 */

const DATABASE = 'audit';
const FORMATION_TIMEOUT_MS = 120_000;

export interface NodeState {
  readonly name: string;
  readonly port: number;
  readonly reported: string;
  readonly assigned: string;
}

/** One pg_autoctl keeper (the monitor, or a Postgres node) and its data. */
export class AutoctlKeeper extends PrivateServer {
  protected readonly signals = { clean: 'SIGTERM', crash: 'SIGKILL' } as const;
  protected override readonly startTimeoutMs = FORMATION_TIMEOUT_MS;
  private readonly createArgs: readonly string[];
  private readonly role: 'monitor' | 'node';

  constructor(role: 'monitor' | 'node', port: number, createArgs: (pgdata: string) => readonly string[]) {
    super(role === 'monitor' ? 'pgafmonitor' : 'pgafnode', port);
    this.role = role;
    this.createArgs = createArgs(this.pgdata);
    const user = postgresUser();
    if (user) chownSync(this.directory, user.uid, user.gid);
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${this.role === 'monitor' ? 'pg_auto_failover' : DATABASE}`;
  }

  get pgdata(): string {
    return join(this.directory, 'pgdata');
  }

  /** pg_autoctl keeps its configuration and state under XDG directories: these are the keeper's own. */
  private get environment(): Record<string, string> {
    return {
      PATH: `${postgresBinaries()}:${process.env.PATH ?? ''}`,
      XDG_CONFIG_HOME: join(this.directory, 'config'),
      XDG_DATA_HOME: join(this.directory, 'share'),
      XDG_RUNTIME_DIR: join(this.directory, 'run'),
      HOME: this.directory,
    };
  }

  /** The monitor is created first and then run; a node is created by its first run (`create … --run`). */
  async createMonitor(): Promise<void> {
    const user = postgresUser();
    await promisify(execFile)('pg_autoctl', ['create', 'monitor', ...this.createArgs], {
      cwd: this.directory,
      env: { ...process.env, ...this.environment },
      uid: user?.uid,
      gid: user?.gid,
    });
  }

  protected launch(): Launch {
    const created = existsSync(join(this.directory, 'config'));
    const args =
      this.role === 'monitor' || created ? ['run', '--pgdata', this.pgdata] : ['create', 'postgres', ...this.createArgs, '--run'];
    return { command: 'pg_autoctl', args, env: this.environment, user: postgresUser(), processGroup: true };
  }

  protected async answers(): Promise<boolean> {
    return postgresAnswers(new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 1_000 }));
  }
}

export class PgAutoFailoverFormation {
  readonly monitor: AutoctlKeeper;
  readonly nodes: readonly AutoctlKeeper[];

  private constructor(monitor: AutoctlKeeper, nodes: AutoctlKeeper[]) {
    this.monitor = monitor;
    this.nodes = nodes;
  }

  /** A monitor, a primary and a synchronous standby, each on a free port; resolves once both nodes are in their state. */
  static async start(): Promise<PgAutoFailoverFormation> {
    const monitorPort = await freePort();
    const common = ['--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl'];
    const monitor = new AutoctlKeeper('monitor', monitorPort, (pgdata) => ['--pgdata', pgdata, '--pgport', String(monitorPort), ...common]);
    const nodes: AutoctlKeeper[] = [];
    const formation = new PgAutoFailoverFormation(monitor, nodes);
    try {
      await monitor.createMonitor();
      await monitor.start();
      await formation.onMonitor(async (client) => {
        for (const [name, value] of Object.entries(TEST_MONITOR_SETTINGS))
          await client.query(`ALTER SYSTEM SET pgautofailover.${name} = ${value}`);
        await client.query('SELECT pg_reload_conf()');
      });
      const monitorUri = `postgres://autoctl_node@127.0.0.1:${monitorPort}/pg_auto_failover?sslmode=disable`;
      for (const index of [1, 2]) {
        const port = await freePort();
        const node = new AutoctlKeeper('node', port, (pgdata) => [
          '--pgdata',
          pgdata,
          '--pgport',
          String(port),
          '--name',
          `node${index}`,
          '--dbname',
          DATABASE,
          '--monitor',
          monitorUri,
          ...common,
        ]);
        nodes.push(node);
        await formation.startNode(node);
      }
      await formation.waitForStates({ node1: 'primary', node2: 'secondary' });
      return formation;
    } catch (error) {
      await formation.remove();
      throw error;
    }
  }

  /** The formation's URI as `pg_autoctl show uri` gives it, as user postgres. */
  get url(): string {
    const hosts = this.nodes.map((node) => `127.0.0.1:${node.port}`).join(',');
    return `postgres://postgres@${hosts}/${DATABASE}?target_session_attrs=read-write`;
  }

  async states(): Promise<NodeState[]> {
    return this.onMonitor(async (client) => {
      const { rows } = await client.query<{
        nodename: string;
        nodeport: number;
        current_group_state: string;
        assigned_group_state: string;
      }>(
        `SELECT nodename, nodeport, current_group_state, assigned_group_state FROM pgautofailover.current_state('default') ORDER BY node_id`,
      );
      return rows.map((row) => ({
        name: row.nodename,
        port: row.nodeport,
        reported: row.current_group_state,
        assigned: row.assigned_group_state,
      }));
    });
  }

  /** Until each named node reports (and is assigned) the given state. */
  async waitForStates(wanted: Record<string, string>, timeoutMs = FORMATION_TIMEOUT_MS): Promise<void> {
    await waitFor(
      async () => {
        const states = await this.states().catch(() => []);
        return Object.entries(wanted).every(([name, state]) =>
          states.some((node) => node.name === name && node.reported === state && node.assigned === state),
        );
      },
      `pg_auto_failover nodes in ${JSON.stringify(wanted)}`,
      timeoutMs,
      250,
    );
  }

  /**
   * What the monitor decided and each keeper reported, oldest first (its event table), for a failure message:
   * a failover test that fails on a loaded machine is otherwise a mystery once the formation is removed.
   */
  async history(): Promise<string> {
    const { rows } = await this.onMonitor((client) =>
      client.query<{
        eventtime: Date;
        nodename: string;
        reportedstate: string;
        goalstate: string;
        reportedlsn: string;
        description: string;
      }>('SELECT eventtime, nodename, reportedstate, goalstate, reportedlsn, description FROM pgautofailover.event ORDER BY eventid'),
    );
    return rows
      .map(
        (row) =>
          `${row.eventtime.toISOString()} ${row.nodename} ${row.reportedstate} -> ${row.goalstate} at ${row.reportedlsn}: ${row.description}`,
      )
      .join('\n');
  }

  /** The node that accepts writes now, if one does. */
  async writableNode(): Promise<AutoctlKeeper | undefined> {
    for (const node of this.nodes) {
      const client = new pg.Client({ connectionString: node.url, connectionTimeoutMillis: 500 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        const { rows } = await client.query<{ transaction_read_only: string }>('SHOW transaction_read_only');
        if (rows[0]?.transaction_read_only === 'off') return node;
      } catch {
        // Down, or starting.
      } finally {
        await client.end().catch(() => undefined);
      }
    }
    return undefined;
  }

  /**
   * A planned switchover (`pg_autoctl perform switchover`): the standby is promoted, the primary demoted. The
   * monitor's function can lose a deadlock to the keepers' own calls (`node_active`, every second each): a
   * suite run's switchover failed with 40P01, and the formation stayed as it was. Its transaction rolled back,
   * so it is asked again, as an operator would.
   */
  async switchover(): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.onMonitor((client) => client.query(`SELECT pgautofailover.perform_failover('default', 0)`));
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== '40P01' || attempt === 5) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  }

  /** The machine of a node dies: SIGKILL to its keeper and its Postgres. */
  async crash(node: AutoctlKeeper): Promise<void> {
    await node.stop('crash');
  }

  /** A node brought back after a crash: its keeper rejoins the formation (as a standby, via pg_rewind). */
  async restart(node: AutoctlKeeper): Promise<void> {
    await this.startNode(node);
  }

  async remove(): Promise<void> {
    for (const node of this.nodes) await node.remove();
    await this.monitor.remove();
  }

  /**
   * Starts a node's keeper. A standby's first start is a pg_basebackup of the primary, which waits for a
   * checkpoint spread over minutes by default: an immediate CHECKPOINT on the primary meanwhile ends it.
   */
  private async startNode(node: AutoctlKeeper): Promise<void> {
    let starting = true;
    const nudge = (async () => {
      while (starting) {
        const primary = await this.writableNode();
        if (primary && primary !== node) await onServer(primary.url, (client) => client.query('CHECKPOINT')).catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    })();
    try {
      await node.start();
    } finally {
      starting = false;
      await nudge;
    }
  }

  private onMonitor<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
    return onServer(this.monitor.url, fn);
  }
}

/**
 * The monitor's settings for a test: failures noticed within about five seconds instead of twenty. Not
 * shorter: on a machine whose two cores run the rest of the suite, a keeper's one-second loop can be late by
 * a second or two, and a monitor that takes that for a failure changes a healthy formation no test asked it
 * to change (an unhealthy standby makes its primary asynchronous; an unhealthy primary is failed over).
 */
const TEST_MONITOR_SETTINGS = {
  health_check_period: 1000,
  health_check_timeout: 2000,
  health_check_max_retries: 2,
  health_check_retry_delay: 500,
  node_considered_unhealthy_timeout: 5000,
  primary_demote_timeout: 5000,
};

async function onServer<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function postgresBinaries(): string {
  const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
  // pg_autoctl itself is in /usr/bin (pg-auto-failover-cli); it runs the pg_ctl it finds on PATH.
  const found = versions.map((version) => `/usr/lib/postgresql/${version}/bin`).find((dir) => existsSync(join(dir, 'pg_ctl')));
  if (!found || !existsSync('/usr/bin/pg_autoctl')) throw new Error('pg_autoctl or pg_ctl not found: install postgresql-15-auto-failover');
  return found;
}

function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}
