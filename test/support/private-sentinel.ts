import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.ts';
import { type Launch, PrivateServer, portAnswers, startOrRemove } from './private-services.ts';
import { waitFor } from './wait.ts';

/** A Redis server of the test's own that may replicate another (a member of a Sentinel-watched pair). */
export class PrivateRedisNode extends PrivateServer {
  protected readonly signals = { clean: 'SIGTERM', crash: 'SIGKILL' } as const;
  private readonly replicaOf: number | undefined;

  private constructor(port: number, replicaOf: number | undefined) {
    super('redis', port);
    this.replicaOf = replicaOf;
  }

  static async start(replicaOf?: number): Promise<PrivateRedisNode> {
    const server = new PrivateRedisNode(await freePort(), replicaOf);
    await startOrRemove(server);
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  protected launch(): Launch {
    // A config file of its own, written once: Sentinel rewrites replicaof there when it reconfigures the
    // server, and a restarted server must come back as what Sentinel made it.
    const configFile = join(this.directory, 'redis.conf');
    if (!existsSync(configFile))
      writeFileSync(
        configFile,
        [
          `port ${this.port}`,
          'bind 127.0.0.1',
          'save ""',
          'appendonly no',
          `dir ${this.directory}`,
          ...(this.replicaOf === undefined ? [] : [`replicaof 127.0.0.1 ${this.replicaOf}`]),
          '',
        ].join('\n'),
      );
    return { command: 'redis-server', args: [configFile] };
  }

  protected answers(): Promise<boolean> {
    return portAnswers(this.port);
  }
}

/** One Redis Sentinel (the Debian redis-sentinel binary) watching a master under `name`. */
export class PrivateSentinel extends PrivateServer {
  protected readonly signals = { clean: 'SIGTERM', crash: 'SIGKILL' } as const;
  readonly name: string;
  private readonly masterPort: number;

  private constructor(port: number, name: string, masterPort: number) {
    super('sentinel', port);
    this.name = name;
    this.masterPort = masterPort;
  }

  static async start(name: string, masterPort: number): Promise<PrivateSentinel> {
    const server = new PrivateSentinel(await freePort(), name, masterPort);
    await startOrRemove(server);
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** The port of the server the sentinel names as master now. */
  async masterPortNow(): Promise<number> {
    const client = new Redis({ port: this.port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await client.connect();
      const [, port] = (await client.call('SENTINEL', 'get-master-addr-by-name', this.name)) as [string, string];
      return Number(port);
    } finally {
      client.disconnect();
    }
  }

  /** A planned switchover: the sentinel promotes a replica and demotes the master. */
  async failover(): Promise<void> {
    const client = new Redis({ port: this.port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await client.connect();
      await client.call('SENTINEL', 'failover', this.name);
    } finally {
      client.disconnect();
    }
  }

  /** Until the sentinel names a master other than `port`. */
  async waitForNewMaster(port: number, timeoutMs = 30_000): Promise<number> {
    let now = port;
    await waitFor(
      async () => {
        now = await this.masterPortNow().catch(() => port);
        return now !== port;
      },
      `Sentinel to promote a replica of 127.0.0.1:${port}`,
      timeoutMs,
      100,
    );
    return now;
  }

  protected launch(): Launch {
    const configFile = join(this.directory, 'sentinel.conf');
    writeFileSync(
      configFile,
      [
        `port ${this.port}`,
        'bind 127.0.0.1',
        `dir ${this.directory}`,
        `sentinel monitor ${this.name} 127.0.0.1 ${this.masterPort} 1`,
        // Fast, for a test: a master silent for a second is down, and a failover may be retried after 3 s.
        `sentinel down-after-milliseconds ${this.name} 1000`,
        `sentinel failover-timeout ${this.name} 3000`,
        '',
      ].join('\n'),
    );
    return { command: 'redis-sentinel', args: [configFile] };
  }

  protected answers(): Promise<boolean> {
    return portAnswers(this.port);
  }
}
