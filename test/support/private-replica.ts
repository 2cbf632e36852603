import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './ports.ts';
import { type Launch, type PrivatePostgres, PrivateServer, postgresAnswers, startOrRemove } from './private-services.ts';

/**
 * A streaming replica of a private Postgres, made as operators make one: `pg_basebackup -R` (which writes
 * primary_conninfo and standby.signal), then a hot standby on a free port of its own.
 */
export class PrivateReplica extends PrivateServer {
  protected readonly signals = { clean: 'SIGINT', crash: 'SIGQUIT' } as const;

  private constructor(port: number) {
    super('replica', port);
  }

  static async start(primary: PrivatePostgres): Promise<PrivateReplica> {
    const server = new PrivateReplica(await freePort());
    const user = postgresUser();
    try {
      if (user) chownSync(server.directory, user.uid, user.gid);
      await promisify(execFile)(
        join(binaries(), 'pg_basebackup'),
        [
          '-h',
          '127.0.0.1',
          '-p',
          String(primary.port),
          '-U',
          'postgres',
          '-D',
          server.dataDirectory,
          '-R',
          '-X',
          'stream',
          '--checkpoint=fast',
        ],
        { cwd: server.directory, uid: user?.uid, gid: user?.gid },
      );
    } catch (error) {
      await server.remove();
      throw error;
    }
    await startOrRemove(server);
    return server;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}`;
  }

  private get dataDirectory(): string {
    return join(this.directory, 'data');
  }

  /** Stops applying the WAL it receives (pg_wal_replay_pause), so that it falls behind the primary. */
  pauseReplay(database: string): Promise<void> {
    return this.run(database, 'SELECT pg_wal_replay_pause()');
  }

  resumeReplay(database: string): Promise<void> {
    return this.run(database, 'SELECT pg_wal_replay_resume()');
  }

  private async run(database: string, sql: string): Promise<void> {
    const client = new pg.Client({ connectionString: `${this.url}/${database}` });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  }

  protected launch(): Launch {
    return {
      command: join(binaries(), 'postgres'),
      args: [
        '-D',
        this.dataDirectory,
        '-p',
        String(this.port),
        '-k',
        this.directory,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'hot_standby=on',
      ],
      user: postgresUser(),
    };
  }

  protected async answers(): Promise<boolean> {
    return postgresAnswers(new pg.Client({ connectionString: `${this.url}/postgres`, connectionTimeoutMillis: 2000 }));
  }
}

function binaries(): string {
  const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
  const found = versions.map((version) => `/usr/lib/postgresql/${version}/bin`).find((dir) => existsSync(join(dir, 'pg_basebackup')));
  if (!found) throw new Error('pg_basebackup not found; install postgresql');
  return found;
}

function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}
