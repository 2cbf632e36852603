import { execFileSync } from 'node:child_process';
import { chownSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './ports.ts';
import { type Launch, PrivateServer, portAnswers, startOrRemove } from './private-services.ts';

export interface PrivatePgBouncerOptions {
  /** The Postgres it pools for (a private one: its port on 127.0.0.1). */
  readonly postgresPort: number;
  readonly poolMode: 'session' | 'transaction';
  /** Server connections per database and user: few, so that clients share them as they would in production. */
  readonly poolSize: number;
}

/**
 * A PgBouncer of the test's own (the Debian package's binary, run in the foreground), trusting user postgres,
 * in front of a private Postgres; killed by its PID like the other private servers.
 */
export class PrivatePgBouncer extends PrivateServer {
  protected readonly signals = { clean: 'SIGTERM', crash: 'SIGKILL' } as const;
  private readonly options: PrivatePgBouncerOptions;

  private constructor(port: number, options: PrivatePgBouncerOptions) {
    super('pgbouncer', port);
    this.options = options;
  }

  static async start(options: PrivatePgBouncerOptions): Promise<PrivatePgBouncer> {
    const server = new PrivatePgBouncer(await freePort(), options);
    server.configure();
    await startOrRemove(server);
    return server;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}`;
  }

  private get configFile(): string {
    return join(this.directory, 'pgbouncer.ini');
  }

  private configure(): void {
    const users = join(this.directory, 'users.txt');
    writeFileSync(users, '"postgres" ""\n');
    writeFileSync(
      this.configFile,
      [
        '[databases]',
        `* = host=127.0.0.1 port=${this.options.postgresPort}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${this.port}`,
        `unix_socket_dir = ${this.directory}`,
        'auth_type = trust',
        `auth_file = ${users}`,
        'admin_users = postgres',
        `pool_mode = ${this.options.poolMode}`,
        `default_pool_size = ${this.options.poolSize}`,
        'max_client_conn = 500',
        '',
      ].join('\n'),
    );
    // PgBouncer will not run as root: it runs as the postgres OS user, who must read its files.
    const user = osUser();
    if (user) for (const file of [this.directory, users, this.configFile]) chownSync(file, user.uid, user.gid);
  }

  protected launch(): Launch {
    const user = osUser();
    return { command: 'pgbouncer', args: [...(user ? ['-u', 'postgres'] : []), this.configFile] };
  }

  protected answers(): Promise<boolean> {
    return portAnswers(this.port);
  }
}

function osUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}
