import { expect } from 'chai';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';
import { PrivateNats, PrivatePostgres } from '../support/private-services.ts';
import { TEST_INGEST_TOKEN, call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/** Stops a Postgres and a NATS of this file's own under a running service. */
describe('outages of Postgres and NATS', function () {
  this.timeout(90_000);
  let postgres: PrivatePostgres;
  let nats: PrivateNats;
  let db: TestDatabase;
  let service: TestService;
  let key: string;

  const ready = () => call(`${service.internalUrl}/readyz`);
  const list = (withKey = key) => call(`${service.baseUrl}/audit/events`, { key: withKey });
  const countStored = async (tenant: string) =>
    Number((await db.pool.query('SELECT count(*) FROM events WHERE tenant_id = $1', [tenant])).rows[0].count);

  before(async () => {
    postgres = await PrivatePostgres.start();
    nats = await PrivateNats.start();
    db = await createTestDatabase(postgres.url);
    service = await startTestService({ databaseUrl: db.url, roles: ['api', 'ingest'], env: { NATS_URL: nats.url } });
    key = (await mintKey(db.url, { tenantId: 'outage', scopes: ['audit:read'] })).key;
    expect((await ready()).status).to.equal(200);
  });

  after(async () => {
    await service?.stop();
    // The database goes with its cluster.
    await db?.pool.end();
    await postgres?.remove();
    await nats?.remove();
  });

  it('answers 503 with a clear body while Postgres is down, then recovers by itself', async () => {
    expect((await list()).status).to.equal(200);
    // Minted before the outage but never presented: checking it needs Postgres, not the key cache.
    const unseenKey = (await mintKey(db.url, { tenantId: 'outage', scopes: ['audit:read'] })).key;
    await postgres.stop();
    try {
      const readiness = await ready();
      expect(readiness.status).to.equal(503);
      expect(readiness.json.checks.postgres.ok).to.equal(false);
      expect(readiness.json.checks.nats.ok).to.equal(true);

      const started = Date.now();
      // A cached key passes authentication and the read fails; an unknown one fails its lookup. Both are a
      // 503 (never a 401: the key is not known to be bad), at once rather than after connection timeouts.
      for (const response of [await list(), await list(unseenKey)]) {
        expect(response.status).to.equal(503);
        expect(response.headers.get('retry-after')).to.equal('1');
        expect(response.json).to.deep.include({ error: 'service_unavailable' });
        expect(response.json.message).to.be.a('string').and.not.include(' at ');
      }
      expect(Date.now() - started).to.be.below(20_000);

      const ingest = await call(`${service.internalUrl}/internal/v1/events`, {
        body: { events: [producerEvent({ tenant_id: 'outage' })] },
        headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
      });
      expect(ingest.status).to.equal(503);
      expect(ingest.headers.get('retry-after')).to.equal('1');
    } finally {
      await postgres.start();
    }
    await waitFor(async () => (await ready()).status === 200, 'readiness after Postgres returned', 20_000, 250);
    await waitFor(async () => (await list()).status === 200, 'reads after Postgres returned', 20_000, 250);
  });

  it('keeps JetStream events published during a Postgres outage and stores them afterwards', async () => {
    const nc: NatsConnection = await connect({ servers: nats.url });
    try {
      await postgres.stop();
      try {
        const writeFailures = () => service.metric('audit_errors_total{kind="ingest_write_failed"}');
        const failuresBefore = await writeFailures();
        const js = jetstream(nc);
        for (let i = 0; i < 5; i += 1) {
          await js.publish(`${service.busNamespace}.audit.ingest.outage-js`, JSON.stringify(producerEvent({ tenant_id: 'outage-js' })));
        }
        // The service has taken them from the stream and failed to store them: they wait for redelivery.
        await waitFor(async () => (await writeFailures()) > failuresBefore, 'a failed write of the published events', 20_000);
      } finally {
        await postgres.start();
      }
      await waitFor(async () => (await countStored('outage-js').catch(() => 0)) === 5, 'events stored after the outage', 30_000, 250);
    } finally {
      await nc.close();
    }
  });

  it('stays in rotation (degraded) while NATS is down, storing HTTP events, and resumes JetStream ingestion when it returns', async () => {
    await nats.stop();
    try {
      await waitFor(async () => (await ready()).json?.checks?.nats?.ok === false, 'readiness to see NATS down', 10_000, 200);
      const readiness = await ready();
      expect(readiness.status).to.equal(200);
      expect(readiness.json.status).to.equal('degraded');
      // Neither reads nor HTTP ingestion need NATS: taking the pod out of rotation would stop both.
      expect((await list()).status).to.equal(200);
      const ingested = await call(`${service.internalUrl}/internal/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
        body: { events: [producerEvent({ tenant_id: 'during-nats-outage' })] },
      });
      expect(ingested.status).to.equal(200);
      expect(await countStored('during-nats-outage')).to.equal(1);
    } finally {
      await nats.start();
    }
    await waitFor(async () => (await ready()).json?.status === 'ready', 'readiness after NATS returned', 30_000, 250);
    const nc = await connect({ servers: nats.url });
    try {
      await jetstream(nc).publish(
        `${service.busNamespace}.audit.ingest.after-nats`,
        JSON.stringify(producerEvent({ tenant_id: 'after-nats' })),
      );
      await waitFor(async () => (await countStored('after-nats')) === 1, 'ingestion to resume after the NATS restart', 30_000, 250);
    } finally {
      await nc.close();
    }
  });

  it('answers /readyz within a second while Postgres hangs', async () => {
    // SIGSTOP freezes the private cluster's postmaster and backends: connections neither open nor answer.
    const frozen = await postgresProcesses(postgres.pid!);
    for (const pid of frozen) process.kill(pid, 'SIGSTOP');
    try {
      const started = Date.now();
      const readiness = await ready();
      expect(Date.now() - started).to.be.below(1_000);
      expect(readiness.status).to.equal(503);
      expect(readiness.json.checks.postgres.ok).to.equal(false);
    } finally {
      for (const pid of frozen) process.kill(pid, 'SIGCONT');
    }
    await waitFor(async () => (await ready()).status === 200, 'readiness after Postgres thawed', 20_000, 250);
  });
});

/** The postmaster and its children (backends, background workers), read from /proc. */
async function postgresProcesses(postmaster: number): Promise<number[]> {
  const { readdir, readFile } = await import('node:fs/promises');
  const children: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // Field 4 is the parent pid; the command name (field 2) may hold spaces, so read after its ')'.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (parent === postmaster) children.push(Number(entry));
  }
  return [postmaster, ...children];
}
