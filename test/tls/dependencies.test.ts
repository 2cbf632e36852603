import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { connectRedis } from '../../src/auth/redisConnection.ts';
import { BusConnectError, connectBus } from '../../src/bus/natsConnection.ts';
import { BusNames, ensureConsumer, ingestConsumerDefinition } from '../../src/bus/jetStreamDefinitions.ts';
import { loadConfig } from '../../src/config/config.ts';
import { Database } from '../../src/db/database.ts';
import { migrate } from '../../src/db/migrate.ts';
import { NotificationListener } from '../../src/db/notificationListener.ts';
import { createLogger, type Logger } from '../../src/platform/logger.ts';
import { isCertificateError } from '../../src/platform/tlsFailure.ts';
import { jetstreamManager } from '@nats-io/jetstream';
import { startTestService, testLogger } from '../support/service.ts';
import { PrivateNats, PrivatePostgres, PrivateRedis } from '../support/private-services.ts';
import { createTestPki, natsOperatorSetup, type TestPki } from '../support/test-pki.ts';
import { waitFor } from '../support/wait.ts';

/** A logger whose JSON lines the test can read. */
function capturingLogger(): { log: Logger; lines: () => Array<Record<string, any>> } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return {
    log: createLogger('info', stream),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line)),
  };
}

const rejection = async (promise: Promise<unknown>): Promise<Error> => {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
};

describe('TLS and authentication to Postgres, Redis and NATS with a private CA', function () {
  this.timeout(90_000);
  let pki: TestPki;
  const cleanups: Array<() => Promise<void> | void> = [];

  before(async () => {
    pki = await createTestPki('audit_cert');
    cleanups.push(() => pki.remove());
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  describe('NATS', () => {
    it('connects with NATS_TLS_CA and uses JetStream; without it, start-up fails naming NATS_TLS_CA', async () => {
      const nats = await PrivateNats.start({ tls: { pki } });
      cleanups.push(() => nats.remove());
      const config = loadConfig({ NATS_URL: nats.url, NATS_TLS_CA: pki.caFile });
      const bus = await connectBus(config.natsUrl, 'tls test', testLogger(), { tls: config.natsTls });
      try {
        await bus.ping();
        const definition = ingestConsumerDefinition(new BusNames({ namespace: 'tlstest', deploymentId: 'tlstest00000' }));
        await ensureConsumer(await jetstreamManager(bus.nc), definition);
        expect((await (await jetstreamManager(bus.nc)).streams.info(definition.stream.name)).config.name).to.equal('TLSTEST_AUDIT_INGEST');
      } finally {
        await bus.close();
      }

      for (const tls of [undefined, { caFile: pki.otherCaFile }]) {
        const error = await rejection(connectBus(nats.url, 'tls test', testLogger(), { tls }));
        expect(error).to.be.instanceOf(BusConnectError);
        expect(error.message).to.match(/^NATS: the server's TLS certificate is not trusted \(.+\); set NATS_TLS_CA/);
      }
    });

    it('presents NATS_TLS_CERT and NATS_TLS_KEY to a server that verifies client certificates', async () => {
      const nats = await PrivateNats.start({ tls: { pki, verifyClients: true } });
      cleanups.push(() => nats.remove());
      const config = loadConfig({
        NATS_URL: nats.url,
        NATS_TLS_CA: pki.caFile,
        NATS_TLS_CERT: pki.client.certFile,
        NATS_TLS_KEY: pki.client.keyFile,
      });
      const bus = await connectBus(config.natsUrl, 'tls test', testLogger(), { tls: config.natsTls });
      await bus.ping();
      await bus.close();
      // The server really insists: the same connection without the client certificate never gets through.
      const refused = await rejection(connect({ servers: nats.url, tls: { caFile: pki.caFile }, timeout: 3_000 }));
      expect(refused.name).to.equal('TimeoutError');
      await waitFor(() => /client didn't provide a certificate/.test(nats.log()), 'the server to log the refused handshake');
    });

    it('authenticates with the credentials file of NATS_CREDS, re-read on connect; refused credentials end start-up naming NATS_CREDS', async () => {
      const operator = natsOperatorSetup();
      const nats = await PrivateNats.start({ tls: { pki }, extraConfig: operator.serverConfig });
      cleanups.push(() => nats.remove());
      const dir = mkdtempSync(join(tmpdir(), 'audit-trail-creds-'));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const credsFile = join(dir, 'audit-trail.creds');
      writeFileSync(credsFile, operator.userCreds);

      const config = loadConfig({ NATS_URL: nats.url, NATS_TLS_CA: pki.caFile, NATS_CREDS: credsFile });
      const bus = await connectBus(config.natsUrl, 'creds test', testLogger(), { tls: config.natsTls, credsFile: config.natsCredsFile });
      await bus.ping();
      await bus.close();

      writeFileSync(credsFile, operator.forgedCreds);
      const forged = await rejection(connectBus(nats.url, 'creds test', testLogger(), { tls: config.natsTls, credsFile }));
      expect(forged).to.be.instanceOf(BusConnectError);
      expect(forged.message).to.match(/^NATS: the server refused the credentials \(.*Authorization Violation.*\); check NATS_CREDS/);
      const anonymous = await rejection(connectBus(nats.url, 'creds test', testLogger(), { tls: config.natsTls }));
      expect(anonymous.message).to.match(/refused the credentials/);
    });
  });

  describe('Redis', () => {
    it('connects to rediss:// with REDIS_TLS_CA; without it, commands fail and the log names REDIS_TLS_CA', async () => {
      const redis = await PrivateRedis.start({ tls: { pki } });
      cleanups.push(() => redis.remove());
      const config = loadConfig({ REDIS_URL: redis.url, REDIS_TLS_CA: pki.caFile });
      const client = connectRedis(config.redisUrl, testLogger(), config.redisTls);
      cleanups.push(() => void client.disconnect());
      await waitFor(() => client.status === 'ready', 'Redis over TLS');
      expect(await client.set('tls-check', 'ok')).to.equal('OK');
      expect(await client.get('tls-check')).to.equal('ok');

      const { log, lines } = capturingLogger();
      const untrusting = connectRedis(redis.url, log);
      cleanups.push(() => void untrusting.disconnect());
      await waitFor(() => lines().length > 0, 'the connection error to be logged');
      expect(await rejection(untrusting.ping())).to.be.instanceOf(Error);
      const [line] = lines();
      expect(line!.msg).to.match(
        /^Redis: the server's TLS certificate is not trusted \(.+\); set REDIS_TLS_CA to the CA certificate that signed it$/,
      );
      expect(line!.level).to.equal('error');
    });

    it('presents REDIS_TLS_CERT and REDIS_TLS_KEY to a server that authenticates clients', async () => {
      const redis = await PrivateRedis.start({ tls: { pki, verifyClients: true } });
      cleanups.push(() => redis.remove());
      const config = loadConfig({
        REDIS_URL: redis.url,
        REDIS_TLS_CA: pki.caFile,
        REDIS_TLS_CERT: pki.client.certFile,
        REDIS_TLS_KEY: pki.client.keyFile,
      });
      const client = connectRedis(config.redisUrl, testLogger(), config.redisTls);
      cleanups.push(() => void client.disconnect());
      await waitFor(() => client.status === 'ready', 'Redis over mutual TLS');
      expect(await client.ping()).to.equal('PONG');

      const anonymous = connectRedis(redis.url, testLogger(), { caFile: pki.caFile });
      cleanups.push(() => void anonymous.disconnect());
      // Refused: the connection closed and the client is trying again, never having been ready.
      let everReady = false;
      anonymous.once('ready', () => (everReady = true));
      await waitFor(() => anonymous.status === 'reconnecting', 'the anonymous client to be refused');
      expect(everReady).to.equal(false);
      expect(anonymous.status).not.to.equal('ready');
      expect(await rejection(anonymous.ping())).to.be.instanceOf(Error);
    });
  });

  describe('Postgres', () => {
    let postgres: PrivatePostgres;
    // A private cluster of its own: its postgres database is as good as any for the service's tables.
    const url = (user = 'postgres') => `${postgres.url.replace('postgres@', `${user}@`)}/postgres`;

    before(async () => {
      postgres = await PrivatePostgres.start({ tls: { pki, clientCertRoles: ['audit_cert'] } });
      cleanups.push(() => postgres.remove());
    });

    it('migrates, queries and LISTENs over verified TLS with DATABASE_SSL_CA', async () => {
      const config = loadConfig({ DATABASE_URL: url(), DATABASE_SSL_CA: pki.caFile });
      expect(new URL(config.databaseUrl).searchParams.get('sslmode')).to.equal('verify-full');
      await migrate(config.databaseUrl, testLogger());
      const db = new Database({ url: config.databaseUrl, poolSize: 2, applicationName: 'tls test', log: testLogger() });
      try {
        const { rows } = await db.query<{ ssl: boolean }>('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()');
        expect(rows).to.deep.equal([{ ssl: true }]);
        const received: Array<string | undefined> = [];
        const listener = new NotificationListener({
          databaseUrl: config.databaseUrl,
          channel: 'tls_check',
          name: 'tls test',
          log: testLogger(),
          onNotification: (payload) => received.push(payload),
        });
        await listener.start();
        try {
          await waitFor(async () => {
            await db.query("SELECT pg_notify('tls_check', 'hello')");
            return received.includes('hello');
          }, 'a notification over TLS');
        } finally {
          await listener.stop();
        }
      } finally {
        await db.close();
      }
    });

    it('fails with a certificate error naming DATABASE_SSL_CA without the CA, and the server refuses connections without TLS', async () => {
      const error = await rejection(migrate(`${url()}?sslmode=verify-full`, testLogger()));
      expect(error.message).to.match(/^Postgres: the server's TLS certificate is not trusted \(.*certificate.*\); set DATABASE_SSL_CA/);
      const untrusting = new pg.Client({ connectionString: `${url()}?sslmode=verify-full` });
      expect(isCertificateError(await rejection(untrusting.connect()))).to.equal(true);
      const plain = new pg.Client({ connectionString: url() });
      expect((await rejection(plain.connect())).message).to.match(/no encryption/);
    });

    it('presents DATABASE_SSL_CERT and DATABASE_SSL_KEY to a role that must show a client certificate', async () => {
      const withCertificate = loadConfig({
        DATABASE_URL: url('audit_cert'),
        DATABASE_SSL_CA: pki.caFile,
        DATABASE_SSL_CERT: pki.client.certFile,
        DATABASE_SSL_KEY: pki.client.keyFile,
      });
      const db = new Database({ url: withCertificate.databaseUrl, poolSize: 1, applicationName: 'tls test', log: testLogger() });
      try {
        const { rows } = await db.query<{ client_dn: string }>('SELECT client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()');
        expect(rows[0]!.client_dn).to.equal('/CN=audit_cert');
      } finally {
        await db.close();
      }
      const withoutCertificate = loadConfig({ DATABASE_URL: url('audit_cert'), DATABASE_SSL_CA: pki.caFile });
      const client = new pg.Client({ connectionString: withoutCertificate.databaseUrl });
      expect((await rejection(client.connect())).message).to.match(/certificate/);
    });

    it('runs the service against all three over TLS, ready on every dependency', async () => {
      const nats = await PrivateNats.start({ tls: { pki } });
      cleanups.push(() => nats.remove());
      const redis = await PrivateRedis.start({ tls: { pki } });
      cleanups.push(() => redis.remove());
      await migrate(loadConfig({ DATABASE_URL: url(), DATABASE_SSL_CA: pki.caFile }).databaseUrl, testLogger());
      const service = await startTestService({
        databaseUrl: url(),
        roles: ['api', 'ingest', 'relay', 'worker'],
        env: {
          DATABASE_SSL_CA: pki.caFile,
          NATS_URL: nats.url,
          NATS_TLS_CA: pki.caFile,
          REDIS_URL: redis.url,
          REDIS_TLS_CA: pki.caFile,
        },
      });
      cleanups.push(() => service.stop());
      let readiness: { status: string; checks: Record<string, { ok: boolean }> } | undefined;
      await waitFor(async () => {
        readiness = (await (await fetch(`${service.internalUrl}/readyz`)).json()) as typeof readiness;
        return readiness!.status === 'ready';
      }, 'every dependency to be ready');
      expect(Object.keys(readiness!.checks).sort()).to.deep.equal(['nats', 'postgres', 'redis']);
    });
  });
});
