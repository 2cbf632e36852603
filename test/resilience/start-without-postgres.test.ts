import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { ENDPOINT_DELIVERIES } from '../../src/delivery/endpointDeliveries.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { StreamRegistry } from '../../src/streams/streamRegistry.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { WebhookRegistry } from '../../src/webhooks/webhookRegistry.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { removeNamespaceStreams } from '../support/natsNamespaces.ts';
import { newEvent, producerEvent } from '../support/newEvents.ts';
import { sealKeyPair } from '../support/integrity.ts';
import { startKubeApiServer, type KubeApiServer } from '../support/kube-apiserver/server.ts';
import { freePort } from '../support/ports.ts';
import { PrivatePostgres } from '../support/private-services.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { TEST_ENCRYPTION_KEY, TEST_INGEST_TOKEN, TEST_PEPPER, call, startTestService, type TestService } from '../support/service.ts';
import { SplunkHecReceiver } from '../support/siem-receivers.ts';
import { waitFor } from '../support/wait.ts';

const TENANT = 'start-without-postgres';
const WAITING = 'Postgres unavailable at start; not ready, retrying';
const CLI_ROLES = ['ingest', 'relay', 'worker', 'sealer', 'streams'] as const;
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const GROUP = 'audittrail.dev';
const VERSION = 'v1alpha1';

/** One role's process (or, for the controller, its service in this one), with what it has logged. */
interface Started {
  readonly role: string;
  readonly internalPort: number;
  readonly lines: string[];
  exitCode: number | null | undefined;
}

/**
 * Issue 28, item 7: every role started while its Postgres is away stays up, live and not ready, retrying
 * with a log line per attempt, and starts and works once Postgres comes (a Kubernetes pod would otherwise
 * sit in CrashLoopBackOff for minutes after a failover that took seconds). Each role but the controller in
 * a process of its own through `audit-trail serve` (the CLI's start path); the controller in this process
 * through startService, against the Kubernetes API stand-in.
 */
describe('roles started while Postgres is away', function () {
  this.timeout(180_000);
  let postgres: PrivatePostgres;
  let db: TestDatabase;
  let pool: Database;
  let receiver: TestReceiver;
  let hec: SplunkHecReceiver;
  let kube: KubeApiServer;
  let controllerService: Promise<TestService>;
  const namespace = `t${randomUUID().slice(0, 8)}`;
  const children = new Map<ChildProcess, Started>();

  before(async () => {
    postgres = await PrivatePostgres.start();
    db = await createTestDatabase(postgres.url);
    pool = new Database({ url: db.url, poolSize: 2, applicationName: 'start test', log: createLogger('silent') });
    receiver = await startReceiver(204);
    hec = await new SplunkHecReceiver({ tokens: { token: {} } }).start();
    kube = await startKubeApiServer({ crdDirectories: ['crds'] });
    // What the roles will have to do once started: a webhook endpoint and a log stream of the tenant.
    const writer = new EventWriter(pool, WEBHOOK_FAN_OUT);
    const secrets = new SecretBox(TEST_ENCRYPTION_KEY);
    const policy = { allowHttp: true, allowPrivateTargets: true };
    const operator = { userId: 'test', userRole: 'operator' };
    await new WebhookRegistry({ db: pool, writer, deliveries: ENDPOINT_DELIVERIES, secrets, policy }).register(
      TENANT,
      { url: receiver.url, event_filter: ['phi.'] },
      operator,
    );
    const streams = new StreamRegistry({
      db: pool,
      writer,
      secrets,
      policy,
      destinations: { timeoutMs: 5_000, allowPrivateTargets: true },
    });
    await streams.create(TENANT, { destination: { type: 'splunk_hec', url: hec.url, token: 'token' }, tree_heads: false }, operator);
  });

  after(async () => {
    for (const child of children.keys()) child.kill('SIGKILL');
    await (await controllerService?.catch(() => undefined))?.stop();
    await removeNamespaceStreams(NATS_URL, namespace);
    await Promise.all([receiver?.close(), hec?.stop(), kube?.stop()]);
    await pool?.close();
    await db?.pool.end().catch(() => undefined);
    await postgres?.remove();
  });

  async function startRole(role: string): Promise<Started> {
    const internalPort = await freePort();
    const started: Started = { role, internalPort, lines: [], exitCode: undefined };
    const child = spawn(process.execPath, ['src/cli.ts', 'serve', '--roles', role], {
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        NATS_URL,
        NATS_NAMESPACE: namespace,
        KEY_PEPPER: TEST_PEPPER,
        INGEST_TOKENS: TEST_INGEST_TOKEN,
        SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
        SEAL_SIGNING_KEY: sealKeyPair().privatePem,
        SEAL_INTERVAL: '200ms',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        DELIVERY_RELAY_POLL_MS: '100',
        STREAMS_POLL_MS: '100',
        SHUTDOWN_DRAIN_DELAY_MS: '0',
        HOST: '127.0.0.1',
        PORT: String(await freePort()),
        INTERNAL_PORT: String(internalPort),
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.set(child, started);
    let pending = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      const text = pending + chunk.toString('utf8');
      const lines = text.split('\n');
      pending = lines.pop()!;
      started.lines.push(...lines);
    });
    child.stderr!.on('data', (chunk: Buffer) => started.lines.push(chunk.toString('utf8')));
    child.once('exit', (code) => {
      started.exitCode = code;
    });
    return started;
  }

  /** The controller through startService in this process, its log lines captured the same way. */
  async function startController(): Promise<Started> {
    const internalPort = await freePort();
    const started: Started = { role: 'controller', internalPort, lines: [], exitCode: undefined };
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        started.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    controllerService = startTestService({
      databaseUrl: db.url,
      roles: ['controller'],
      kubeConfig: kube.kubeConfig('controller'),
      log: createLogger('info', sink),
      env: {
        INTERNAL_PORT: String(internalPort),
        CONTROLLER_LEASE_DURATION_MS: '1000',
        CONTROLLER_RENEW_DEADLINE_MS: '600',
        CONTROLLER_RETRY_PERIOD_MS: '100',
      },
    });
    // A start that fails is this test's failure, reported where the test awaits it.
    controllerService.catch(() => undefined);
    return started;
  }

  const probe = async (started: Started, path: string) =>
    call(`http://127.0.0.1:${started.internalPort}${path}`).catch(() => ({ status: 0, json: undefined as any }));

  it('keeps each role up and not ready, retrying with a log line per attempt, then starts it and it works', async () => {
    await postgres.stop();
    const all = [...(await Promise.all(CLI_ROLES.map(startRole))), await startController()];

    for (const started of all) {
      // Live (its internal port answers) but not ready, and waiting rather than dead: several attempts logged.
      await waitFor(
        async () => started.lines.filter((line) => line.includes(WAITING)).length >= 3,
        `${started.role} to log three attempts (it logged: ${started.lines.slice(-3).join(' | ')})`,
        60_000,
      );
      expect(started.exitCode, `${started.role} exited`).to.equal(undefined);
      expect((await probe(started, '/healthz')).status, `${started.role} /healthz`).to.equal(200);
      const readiness = await probe(started, '/readyz');
      expect(readiness.status, `${started.role} /readyz`).to.equal(503);
      expect(readiness.json.checks.start.ok).to.equal(false);
      expect(readiness.json.checks.postgres.ok).to.equal(false);
      const attempt = JSON.parse(started.lines.find((line) => line.includes(WAITING))!);
      expect(attempt).to.include({ level: 'warn', step: 'read the deployment id' });
      expect(attempt.retry_in_ms).to.be.a('number');
    }

    await postgres.start();
    for (const started of all) {
      await waitFor(async () => (await probe(started, '/readyz')).status === 200, `${started.role} ready`, 60_000);
    }
    expect([...children.values()].map((started) => started.exitCode)).to.deep.equal(CLI_ROLES.map(() => undefined));

    // ingest: an HTTP batch is stored; its delivery is published by ingest and sent by the worker.
    const ingested = randomUUID();
    const ingestPort = all.find((started) => started.role === 'ingest')!.internalPort;
    const response = await call(`http://127.0.0.1:${ingestPort}/internal/v1/events`, {
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
      body: { events: [producerEvent({ tenant_id: TENANT, event_id: ingested, timestamp: new Date().toISOString() })] },
    });
    expect(response.status, response.text).to.equal(200);
    // relay: an event written without a publisher reaches NATS only through the relay's outbox.
    const written = newEvent({ tenantId: TENANT });
    await new EventWriter(pool, WEBHOOK_FAN_OUT).write([written], 'test');

    const delivered = () => new Set(receiver.received.map((delivery) => delivery.headers['x-service-event-id']));
    await waitFor(() => delivered().has(ingested) && delivered().has(written.eventId), 'both events delivered (worker, relay)', 30_000);
    // sealer: both events in a signed tree head.
    await waitFor(
      async () => {
        const { rows } = await pool.query<{ size: number | null }>('SELECT max(tree_size) AS size FROM tree_heads WHERE tenant_id = $1', [
          TENANT,
        ]);
        return (rows[0]?.size ?? 0) >= 2;
      },
      'both events sealed',
      30_000,
    );
    // streams: both sent to the log stream's destination (it streams sealed leaves).
    const streamed = () => JSON.stringify(hec.events);
    await waitFor(() => streamed().includes(ingested) && streamed().includes(written.eventId), 'both events streamed', 30_000);
    // controller: an ApiKey resource becomes a key in its Secret.
    await controllerService;
    const custom = kube.kubeConfig('tester').makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: 'default',
      plural: 'apikeys',
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name: 'after-start' },
        spec: { tenantId: TENANT, scopes: ['audit:read'], secretName: 'after-start-key' },
      },
    });
    const core = kube.kubeConfig('tester').makeApiClient(CoreV1Api);
    await waitFor(
      async () => (await core.readNamespacedSecret({ name: 'after-start-key', namespace: 'default' }).catch(() => undefined)) !== undefined,
      'the controller to mint the key into its Secret',
      30_000,
    );
  });

  it('stops a role that still waits for Postgres at once, on the first signal', async () => {
    await postgres.stop();
    const started = await startRole('relay');
    await waitFor(() => started.lines.some((line) => line.includes(WAITING)), 'relay waiting', 60_000);
    const child = [...children].find(([, value]) => value === started)![0];
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    expect(code).to.equal(0);
    expect(started.lines.join('\n')).to.include('stopped during start-up');
    await postgres.start();
  });
});
