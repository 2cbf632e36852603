import { Database } from '../../src/db/database.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { PrivateNats, PrivatePostgres } from './private-services.ts';
import { startReceiver, type Reply, type TestReceiver } from './receiver.ts';
import { RoleProcesses } from './roleProcesses.ts';
import { TEST_ENCRYPTION_KEY, call, startTestService, testLogger, type TestService } from './service.ts';
import { testWebhookRegistry } from './webhookRegistry.ts';

export const HUNG_CONCURRENCY = 4;
/**
 * Well above the lanes' one second without a finished request that marks an endpoint slow (endpointLanes.ts),
 * as the default 10 s is. A limit under a second is the case of a test of its own: requests then end by
 * timing out more often than once a second, and only that none is answered marks the endpoint slow.
 */
export const HUNG_TIMEOUT_MS = 2_500;
const DELIVERY_ENV = {
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  DELIVERY_RELAY_POLL_MS: '100',
  DELIVERY_ENDPOINT_CONCURRENCY: String(HUNG_CONCURRENCY),
  DELIVERY_TIMEOUT_MS: String(HUNG_TIMEOUT_MS),
  // A timed-out attempt is retried only after the test: every attempt seen here is a first attempt.
  DELIVERY_SCHEDULE: '1h,1h,1h,1h',
};

export interface HungDeployment {
  readonly db: TestDatabase;
  readonly endpoints: Array<{ id: string; receiver: TestReceiver }>;
}

/**
 * The hung-endpoint tests' bed (test/resilience/hung-endpoint*.test.ts): Postgres and NATS servers of their own,
 * and what each test starts on them (databases with endpoints on receivers, relays and workers), stopped by
 * reset() after each test.
 */
export class HungEndpointBed {
  readonly postgres: PrivatePostgres;
  readonly nats: PrivateNats;
  private readonly databases: TestDatabase[] = [];
  private readonly pools: Database[] = [];
  private readonly receivers: TestReceiver[] = [];
  private readonly services: TestService[] = [];
  private readonly roles = new RoleProcesses();
  /** Processes started by serveInChild: each its own NATS namespace. */
  private servedInChildren = 0;

  private constructor(postgres: PrivatePostgres, nats: PrivateNats) {
    this.postgres = postgres;
    this.nats = nats;
  }

  static async start(): Promise<HungEndpointBed> {
    const [postgres, nats] = await Promise.all([PrivatePostgres.start(), PrivateNats.start()]);
    return new HungEndpointBed(postgres, nats);
  }

  /** A database of the private Postgres with one endpoint per tenant and reply, each on a receiver of its own. */
  async deployment(endpoints: Array<{ tenantId: string; reply: Reply }>): Promise<HungDeployment> {
    const db = await createTestDatabase(this.postgres.url);
    this.databases.push(db);
    const pool = this.pool(db);
    const registry = testWebhookRegistry(pool);
    const registered: Array<{ id: string; receiver: TestReceiver }> = [];
    for (const { tenantId, reply } of endpoints) {
      const receiver = await startReceiver(reply);
      this.receivers.push(receiver);
      const { endpoint } = await registry.register(
        tenantId,
        { url: receiver.url, event_filter: ['phi.'] },
        { userId: 'test', userRole: 'operator' },
      );
      registered.push({ id: endpoint.id, receiver });
    }
    return { db, endpoints: registered };
  }

  /** A pool of the test's own on a deployment's database, closed after the test. */
  pool(db: TestDatabase, poolSize = 2): Database {
    const pool = new Database({ url: db.url, poolSize, applicationName: 'hung endpoint test', log: testLogger() });
    this.pools.push(pool);
    return pool;
  }

  /** A relay and a worker; with `busNamespace`, one more of each sharing another service's outbox and queue. */
  async startService(db: TestDatabase, env: Record<string, string> = {}, busNamespace?: string): Promise<TestService> {
    const service = await startTestService({
      databaseUrl: db.url,
      roles: ['relay', 'worker'],
      busNamespace,
      env: { ...DELIVERY_ENV, NATS_URL: this.nats.url, ...env },
    });
    this.services.push(service);
    return service;
  }

  /** `serve --roles relay,worker` in a child process; returns a reader of one series of its /metrics. */
  async serveInChild(db: TestDatabase, env: Record<string, string>): Promise<(series: string) => Promise<number>> {
    this.servedInChildren += 1;
    const child = await this.roles.start(['relay', 'worker'], {
      ...DELIVERY_ENV,
      SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      DATABASE_URL: db.url,
      NATS_URL: this.nats.url,
      NATS_NAMESPACE: `hung${this.servedInChildren}`,
      ...env,
    });
    const url = this.roles.internalUrl(child);
    return async (series) => {
      const { text } = await call(`${url}/metrics`);
      const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
      return line === undefined ? 0 : Number(line.slice(series.length + 1));
    };
  }

  /** After each test: its processes, services, receivers and pools (its database stays until remove()). */
  async reset(): Promise<void> {
    this.roles.killAll();
    await Promise.all(this.services.splice(0).map((service) => service.stop()));
    await Promise.all(this.receivers.splice(0).map((receiver) => receiver.close()));
    await Promise.all(this.pools.splice(0).map((pool) => pool.close()));
  }

  async remove(): Promise<void> {
    await this.reset();
    await Promise.all(this.databases.map((db) => db.pool.end().catch(() => undefined)));
    await this.nats.remove();
    await this.postgres.remove();
  }
}
