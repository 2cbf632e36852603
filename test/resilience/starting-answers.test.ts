import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { expect } from 'chai';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { removeNamespaceStreams } from '../support/natsNamespaces.ts';
import { producerEvent } from '../support/newEvents.ts';
import { freePort } from '../support/ports.ts';
import { PrivatePostgres } from '../support/private-services.ts';
import { TEST_ENCRYPTION_KEY, TEST_INGEST_TOKEN, TEST_PEPPER, mintKey } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const TENANT = 'starting-answers';

interface Answer {
  readonly route: string;
  readonly status: number;
  readonly body: string;
  readonly retryAfter: string | null;
  readonly afterStarted: boolean;
}

/**
 * Issue 42, item 1: a process that is starting answers every route 503 with the JSON error shape and
 * `Retry-After`, never the 404 of a route not registered yet (a producer treats a 4xx as final and drops its
 * batch). ingest and api in one `audit-trail serve`, first with their Postgres (a private one) away for a
 * while, then restarted with it up, requests sent throughout, the moments before "started" included.
 */
describe('a starting process answers 503, never 404', function () {
  this.timeout(120_000);
  let postgres: PrivatePostgres;
  let db: TestDatabase;
  let key: string;
  const children: ChildProcess[] = [];
  /** Each started process's own, removed from the machine's NATS afterwards. */
  const namespaces: string[] = [];

  before(async () => {
    postgres = await PrivatePostgres.start();
    db = await createTestDatabase(postgres.url);
    ({ key } = await mintKey(db.url, { tenantId: TENANT, scopes: ['audit:read'] }));
    await db.pool.end();
  });

  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    for (const namespace of namespaces) await removeNamespaceStreams(NATS_URL, namespace);
    await postgres?.remove();
  });

  async function serve(): Promise<{ child: ChildProcess; publicPort: number; internalPort: number; started: () => boolean }> {
    const [publicPort, internalPort] = [await freePort(), await freePort()];
    const namespace = `t${internalPort}`;
    namespaces.push(namespace);
    const child = spawn(process.execPath, ['src/cli.ts', 'serve', '--roles', 'ingest,api'], {
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        NATS_URL,
        NATS_NAMESPACE: namespace,
        KEY_PEPPER: TEST_PEPPER,
        INGEST_TOKENS: TEST_INGEST_TOKEN,
        SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
        SHUTDOWN_DRAIN_DELAY_MS: '0',
        HOST: '127.0.0.1',
        PORT: String(publicPort),
        INTERNAL_PORT: String(internalPort),
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    let started = false;
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString('utf8').includes('"audit-trail started"')) started = true;
    });
    return { child, publicPort, internalPort, started: () => started };
  }

  /**
   * Sends both routes in a loop from the moment the internal port listens until `afterStart` answers came
   * after "started"; a connection refused counts as an answer (status 0), and a wrong one.
   */
  async function hammer(
    ports: { publicPort: number; internalPort: number; started: () => boolean },
    afterStart: number,
  ): Promise<Answer[]> {
    const answers: Answer[] = [];
    await waitFor(
      () =>
        fetch(`http://127.0.0.1:${ports.internalPort}/healthz`).then(
          () => true,
          () => false,
        ),
      'the internal port to listen',
      30_000,
      5,
    );
    const routes: Array<[string, () => Promise<Response>]> = [
      [
        'ingest',
        () =>
          fetch(`http://127.0.0.1:${ports.internalPort}/internal/v1/events`, {
            method: 'POST',
            headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json' },
            body: JSON.stringify({ events: [producerEvent({ tenant_id: TENANT })] }),
          }),
      ],
      [
        'list',
        () => fetch(`http://127.0.0.1:${ports.publicPort}/api/v2/public/audit/events`, { headers: { authorization: `Bearer ${key}` } }),
      ],
    ];
    const done = () => answers.filter((answer) => answer.afterStarted).length >= afterStart;
    const worker = async () => {
      while (!done()) {
        for (const [route, send] of routes) {
          const afterStarted = ports.started();
          const answer = await send().then(
            async (response) => ({ status: response.status, body: await response.text(), retryAfter: response.headers.get('retry-after') }),
            (error: Error) => ({ status: 0, body: String(error.cause ?? error), retryAfter: null }),
          );
          answers.push({ route, afterStarted, ...answer });
        }
      }
    };
    await Promise.all([worker(), worker(), worker()]);
    return answers;
  }

  function expectOnly503Or200(answers: readonly Answer[]): void {
    for (const answer of answers) {
      if (answer.status === 200) continue;
      expect(answer.status, `${answer.route}: ${answer.body}`).to.equal(503);
      expect(JSON.parse(answer.body)).to.include({ error: 'service_unavailable' });
      expect(answer.retryAfter, answer.route).to.match(/^[1-9][0-9]*$/);
    }
  }

  it('with Postgres away at start: 503 with Retry-After on both ports until started, then 200', async () => {
    await postgres.stop();
    const service = await serve();
    const answers = hammer(service, 6);
    await delay(2_000);
    await postgres.start();
    const seen = await answers;
    expectOnly503Or200(seen);
    const waiting = seen.filter((answer) => !answer.afterStarted);
    expect(waiting.filter((answer) => answer.route === 'ingest' && answer.status === 503)).to.have.length.greaterThan(3);
    expect(waiting.filter((answer) => answer.route === 'list' && answer.status === 503)).to.have.length.greaterThan(3);
    expect(seen.some((answer) => answer.afterStarted && answer.route === 'ingest' && answer.status === 200)).to.equal(true);
    service.child.kill('SIGTERM');
    await once(service.child, 'exit');
  });

  it('restarted with Postgres up, three times: no 404 and no refused connection in the moments before "started"', async () => {
    for (let run = 0; run < 3; run += 1) {
      const service = await serve();
      const seen = await hammer(service, 6);
      expectOnly503Or200(seen);
      expect(seen.filter((answer) => answer.status === 200).length, 'answers after start').to.be.greaterThan(0);
      service.child.kill('SIGTERM');
      await once(service.child, 'exit');
    }
  });
});
