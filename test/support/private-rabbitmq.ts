import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './ports.ts';
import { type Launch, PrivateServer, portAnswers, startOrRemove } from './private-services.ts';

/**
 * A RabbitMQ node of one test file's own (private-services.ts has why): its own node name, AMQP and
 * distribution ports, database, logs, config and Erlang cookie, all in its directory, and no plugins. The
 * machine's broker (127.0.0.1:5672) is never touched; this node only registers its name with the machine's
 * epmd, as every Erlang node does. It runs the Erlang VM in place of the start script (RUNNING_UNDER_SYSTEMD),
 * so the PID held is the broker's own: SIGTERM stops it cleanly, SIGKILL crashes it, and its data stays for
 * a start() on the same port. Starting takes seconds (tens on a loaded machine): one node per file.
 */
export class PrivateRabbitMq extends PrivateServer {
  protected readonly signals = { clean: 'SIGTERM', crash: 'SIGKILL' } as const;
  // An Erlang VM and its boot: 5-10 s on an idle machine, four times that on a busy one.
  protected override readonly startTimeoutMs = 120_000;
  private readonly distPort: number;

  private constructor(port: number, distPort: number) {
    super('rabbitmq', port);
    this.distPort = distPort;
    writeFileSync(join(this.directory, 'rabbitmq.conf'), `listeners.tcp.1 = 127.0.0.1:${port}\n`);
    writeFileSync(join(this.directory, 'enabled_plugins'), '[].\n');
    writeFileSync(join(this.directory, 'rabbitmq-env.conf'), '');
  }

  static async start(): Promise<PrivateRabbitMq> {
    const server = new PrivateRabbitMq(await freePort(), await freePort());
    await startOrRemove(server);
    return server;
  }

  /** guest may connect from loopback, as RabbitMQ allows by default. */
  get url(): string {
    return `amqp://127.0.0.1:${this.port}`;
  }

  protected launch(): Launch {
    const { directory } = this;
    return {
      command: '/usr/lib/rabbitmq/bin/rabbitmq-server',
      args: [],
      env: {
        HOME: directory,
        RUNNING_UNDER_SYSTEMD: 'true',
        RABBITMQ_CONF_ENV_FILE: join(directory, 'rabbitmq-env.conf'),
        RABBITMQ_CONFIG_FILE: join(directory, 'rabbitmq.conf'),
        RABBITMQ_ENABLED_PLUGINS_FILE: join(directory, 'enabled_plugins'),
        RABBITMQ_NODENAME: `audit-trail-test-${this.port}@localhost`,
        RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
        RABBITMQ_NODE_PORT: String(this.port),
        RABBITMQ_DIST_PORT: String(this.distPort),
        RABBITMQ_MNESIA_BASE: join(directory, 'mnesia'),
        RABBITMQ_LOG_BASE: join(directory, 'log'),
        ERL_EPMD_ADDRESS: '127.0.0.1',
      },
    };
  }

  protected answers(): Promise<boolean> {
    return portAnswers(this.port);
  }
}
