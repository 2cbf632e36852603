import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { promisify } from 'node:util';
import { ConfigError, loadConfig } from '../../src/config/config.ts';

const run = promisify(execFile);

describe('configuration', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig({});
    expect(config).to.deep.include({
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/audit_trail',
      redisUrl: 'redis://127.0.0.1:6379',
      natsUrl: 'nats://127.0.0.1:4222',
      port: 8080,
      internalPort: 8081,
      keyEnvironment: 'live',
      logLevel: 'info',
      keyPepper: undefined,
      operatorActor: 'operator-cli',
      shutdownDrainDelayMs: 5_000,
      // With DATABASE_READ_URL only exports and log streams read the replica unless told "all".
      readReplicaReads: 'long',
    });
    expect(loadConfig({ READ_REPLICA_READS: 'all' }).readReplicaReads).to.equal('all');
    expect(config.ingestWindow).to.deep.equal({ maxAgeMs: 400 * 86_400_000, maxFutureSkewMs: 5 * 60_000 });
    expect(loadConfig({ AUDIT_ACTOR: 'alice@ops' }).operatorActor).to.equal('alice@ops');
    expect(loadConfig({ INGEST_MAX_EVENT_AGE: '30d' }).ingestWindow.maxAgeMs).to.equal(30 * 86_400_000);
    expect(() => loadConfig({ INGEST_MAX_EVENT_AGE: 'a year' })).to.throw(/INGEST_MAX_EVENT_AGE: must be a duration/);
    expect(config.delivery.scheduleMs).to.deep.equal([60_000, 300_000, 1_800_000, 7_200_000]);
    expect(config.delivery).to.deep.include({ endpointConcurrency: 16, maxSockets: 512 });
    expect(config.seal).to.deep.equal({ intervalMs: 10_000, heartbeatMs: 3_600_000, signingKey: undefined, checkpointOrigin: undefined });
    expect(Object.isFrozen(config)).to.equal(true);
  });

  it('bounds how exports yield to short requests, with 0ms turning it off', () => {
    const config = loadConfig({});
    expect(config.longReadYield).to.deep.equal({ maxWaitMs: 100, maxShare: 0.5 });
    expect(config.longReadFetchRows).to.equal(100);
    expect(loadConfig({ LONG_READ_YIELD: '0ms', LONG_READ_YIELD_SHARE: '0.2' }).longReadYield).to.deep.equal({
      maxWaitMs: 0,
      maxShare: 0.2,
    });
    // A share of 1 would let an export pause for ever beside a steady stream of requests.
    expect(() => loadConfig({ LONG_READ_YIELD_SHARE: '1' })).to.throw(/LONG_READ_YIELD_SHARE/);
    expect(() => loadConfig({ LONG_READ_FETCH_ROWS: '0' })).to.throw(/LONG_READ_FETCH_ROWS/);
  });

  it('bounds the duty cycle of exports beside short requests, with 1 turning it off', () => {
    expect(loadConfig({}).longReadDutyCycle).to.deep.equal({ dutyCycle: 0.3, windowMs: 1_000 });
    expect(loadConfig({ LONG_READ_DUTY_CYCLE: '1', LONG_READ_DUTY_WINDOW: '250ms' }).longReadDutyCycle).to.deep.equal({
      dutyCycle: 1,
      windowMs: 250,
    });
    // Below 0.1 an export beside a steady trickle of requests would crawl at a tenth of its speed or less.
    expect(() => loadConfig({ LONG_READ_DUTY_CYCLE: '0.05' })).to.throw(/LONG_READ_DUTY_CYCLE/);
    expect(() => loadConfig({ LONG_READ_DUTY_CYCLE: '1.5' })).to.throw(/LONG_READ_DUTY_CYCLE/);
    expect(() => loadConfig({ LONG_READ_DUTY_WINDOW: '2m' })).to.throw(/LONG_READ_DUTY_WINDOW/);
  });

  it('parses lists, flags and durations', () => {
    const config = loadConfig({
      TRUSTED_PROXIES: '10.0.0.0/8, 192.168.1.1',
      WEBHOOK_ALLOW_HTTP: 'true',
      DELIVERY_SCHEDULE: '1s,250ms,2m',
      INGEST_TOKENS: `${'a'.repeat(24)},${'b'.repeat(30)}`,
    });
    expect(config.trustedProxies.map((cidr) => cidr.text)).to.deep.equal(['10.0.0.0/8', '192.168.1.1/32']);
    expect(config.webhookAllowHttp).to.equal(true);
    expect(config.delivery.scheduleMs).to.deep.equal([1000, 250, 120_000]);
    expect(config.ingestTokens).to.have.length(2);
  });

  it('reads the sealing interval, heartbeat and Ed25519 signing key, also a key written on one line with \\n', () => {
    const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const config = loadConfig({ SEAL_INTERVAL: '500ms', SEAL_HEARTBEAT: '10m', SEAL_SIGNING_KEY: pem.trimEnd().replace(/\n/g, '\\n') });
    expect(config.seal.intervalMs).to.equal(500);
    expect(config.seal.heartbeatMs).to.equal(600_000);
    expect(config.seal.signingKey?.asymmetricKeyType).to.equal('ed25519');
    expect(loadConfig({ CHECKPOINT_ORIGIN: 'audit.example.com/trail/' }).seal.checkpointOrigin).to.equal('audit.example.com/trail');
    const ecKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    expect(() => loadConfig({ SEAL_SIGNING_KEY: ecKey })).to.throw(/^SEAL_SIGNING_KEY: must be an Ed25519 private key, not ec$/);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['PORT', 'eighty', /PORT/],
    ['PORT', '70000', /PORT: must be a port number/],
    ['DATABASE_URL', 'mysql://localhost/db', /DATABASE_URL: must be a URL with scheme postgres or postgresql/],
    ['KEY_PEPPER', 'short', /KEY_PEPPER: must be at least 32 characters/],
    ['SECRET_ENCRYPTION_KEY', 'abc', /SECRET_ENCRYPTION_KEY: must be 64 hex characters/],
    ['KEY_ENVIRONMENT', 'prod', /KEY_ENVIRONMENT: must be live or test/],
    ['READ_REPLICA_READS', 'pages', /^READ_REPLICA_READS: must be long or all$/],
    ['LOG_LEVEL', 'loud', /LOG_LEVEL: must be one of/],
    ['TRUSTED_PROXIES', '10.0.0.0/40', /TRUSTED_PROXIES: "10.0.0.0\/40" is not an IP address or CIDR range/],
    ['WEBHOOK_ALLOW_HTTP', 'maybe', /WEBHOOK_ALLOW_HTTP: must be true or false/],
    ['DELIVERY_SCHEDULE', '1m,soon', /DELIVERY_SCHEDULE: must be a comma-separated list of durations/],
    ['INGEST_TOKENS', 'short', /INGEST_TOKENS: each token must be at least 24 characters/],
    ['SEAL_INTERVAL', 'often', /SEAL_INTERVAL: must be a duration such as 10s/],
    ['SEAL_INTERVAL', '10ms', /SEAL_INTERVAL: must be at least 100ms/],
    ['SEAL_HEARTBEAT', '2h', /SEAL_HEARTBEAT: must be at most 1h/],
    ['CHECKPOINT_ORIGIN', 'audit example+trail', /^CHECKPOINT_ORIGIN: must be a schema-less URL such as audit.example.com\/trail/],
    ['SEAL_SIGNING_KEY', 'secret-value', /^SEAL_SIGNING_KEY: must be an Ed25519 private key in PEM \(PKCS#8\)/],
    ['PUBLIC_BASE_URL', 'ftp://audit.example.com', /^PUBLIC_BASE_URL: must be a URL with scheme http or https/],
    ['PUBLIC_BASE_URL', 'https://audit.example.com/#x', /^PUBLIC_BASE_URL: must not have a query or fragment/],
    [
      'PORTAL_FRAME_ANCESTORS',
      'https://console.example.com; script-src *',
      /^PORTAL_FRAME_ANCESTORS: must be a comma-separated list of origins/,
    ],
    ['PORTAL_FRAME_ANCESTORS', 'https://console.example.com/admin', /^PORTAL_FRAME_ANCESTORS: must be a comma-separated list of origins/],
    ['PORTAL_FRAME_ANCESTORS', '*', /^PORTAL_FRAME_ANCESTORS: must be a comma-separated list of origins/],
  ];
  for (const [variable, value, message] of bad) {
    it(`refuses ${variable}=${value} naming the variable`, () => {
      expect(() => loadConfig({ [variable]: value }))
        .to.throw(ConfigError)
        .with.property('message')
        .that.matches(message);
    });
  }

  it('takes the portal settings: PUBLIC_BASE_URL without its trailing slash, PORTAL_FRAME_ANCESTORS as origins, none by default', () => {
    const config = loadConfig({
      PUBLIC_BASE_URL: 'https://audit.example.com/trail/',
      PORTAL_FRAME_ANCESTORS: "https://console.example.com, https://*.clinics.example:8443,'self'",
    });
    expect(config.publicBaseUrl).to.equal('https://audit.example.com/trail');
    expect(config.portalFrameAncestors).to.deep.equal(['https://console.example.com', 'https://*.clinics.example:8443', "'self'"]);
    expect(loadConfig({}).portalFrameAncestors).to.deep.equal([]);
    expect(loadConfig({}).publicBaseUrl).to.equal(undefined);
  });

  describe('TLS files and stream replicas', () => {
    const readable = 'package.json';

    it('turns DATABASE_SSL_CA, _CERT and _KEY into the libpq parameters of DATABASE_URL, verify-full unless the URL says otherwise', () => {
      const config = loadConfig({
        DATABASE_URL: 'postgres://u:p%40ss@db.internal:5432/audit',
        DATABASE_SSL_CA: readable,
        DATABASE_SSL_CERT: readable,
        DATABASE_SSL_KEY: readable,
      });
      const url = new URL(config.databaseUrl);
      expect(Object.fromEntries(url.searchParams)).to.deep.equal({
        sslrootcert: readable,
        sslcert: readable,
        sslkey: readable,
        sslmode: 'verify-full',
      });
      expect(url.password).to.equal('p%40ss');
      const own = loadConfig({
        DATABASE_URL: 'postgres://db.internal/audit?sslmode=verify-ca&uselibpqcompat=true',
        DATABASE_SSL_CA: readable,
      });
      expect(new URL(own.databaseUrl).searchParams.get('sslmode')).to.equal('verify-ca');
      expect(loadConfig({ DATABASE_URL: 'postgres://db.internal/audit' }).databaseUrl).to.equal('postgres://db.internal/audit');
    });

    it('hands NATS and Redis their files, and the stream replicas', () => {
      const config = loadConfig({
        NATS_TLS_CA: readable,
        NATS_CREDS: readable,
        NATS_STREAM_REPLICAS: '3',
        REDIS_URL: 'rediss://redis.internal:6380',
        REDIS_TLS_CA: readable,
        REDIS_TLS_CERT: readable,
        REDIS_TLS_KEY: readable,
      });
      expect(config.natsTls).to.deep.equal({ caFile: readable, certFile: undefined, keyFile: undefined });
      expect(config.natsCredsFile).to.equal(readable);
      expect(config.natsStreamReplicas).to.equal(3);
      expect(config.redisTls).to.deep.equal({ caFile: readable, certFile: readable, keyFile: readable });
      expect(loadConfig({})).to.deep.include({ natsTls: undefined, natsCredsFile: undefined, natsStreamReplicas: 1, redisTls: undefined });
    });

    const refused: Array<[Record<string, string>, RegExp]> = [
      [{ NATS_STREAM_REPLICAS: '2' }, /^NATS_STREAM_REPLICAS: must be 1 or 3$/],
      [{ NATS_TLS_CA: '/nonexistent/ca.crt' }, /^NATS_TLS_CA: cannot read \/nonexistent\/ca.crt \(ENOENT\)$/],
      [{ NATS_CREDS: '/nonexistent/user.creds' }, /^NATS_CREDS: cannot read/],
      [{ NATS_TLS_CERT: readable }, /^NATS_TLS_KEY: is required with NATS_TLS_CERT and NATS_TLS_KEY/],
      [{ DATABASE_SSL_KEY: readable }, /^DATABASE_SSL_CERT: is required with/],
      [{ REDIS_TLS_CA: readable }, /^REDIS_URL: must be a rediss:\/\/ URL when REDIS_TLS_CA or REDIS_TLS_CERT is set$/],
      [
        { DATABASE_URL: 'postgres://db/x?sslrootcert=/ca.pem', DATABASE_SSL_CA: readable },
        /^DATABASE_URL: names sslrootcert and so does DATABASE_SSL_CA; set one of them$/,
      ],
      [{ DATABASE_URL: 'postgres://db/x?sslmode=disable', DATABASE_SSL_CA: readable }, /^DATABASE_URL: says sslmode=disable/],
    ];
    for (const [env, message] of refused) {
      it(`refuses ${JSON.stringify(env)} naming the variable`, () => {
        expect(() => loadConfig(env))
          .to.throw(ConfigError)
          .with.property('message')
          .that.matches(message);
      });
    }
  });

  it('stops the process with one line naming the variable', async () => {
    const failure = await run(process.execPath, ['src/cli.ts', 'serve'], { env: { ...process.env, PORT: 'eighty' } }).catch(
      (error: { code: number; stderr: string; stdout: string }) => error,
    );
    expect((failure as { code: number }).code).to.equal(1);
    const stderr = (failure as { stderr: string }).stderr;
    expect(stderr.trim().split('\n')).to.have.length(1);
    expect(stderr).to.match(/^audit-trail: configuration error: PORT: /);
  });

  it('names a secret a role needs when it is missing', async () => {
    const failure = await run(process.execPath, ['src/cli.ts', 'serve', '--roles', 'api'], {
      env: { ...process.env, KEY_PEPPER: '', PORT: '0', INTERNAL_PORT: '0', LOG_LEVEL: 'silent' },
    }).catch((error: { code: number; stderr: string }) => error);
    expect((failure as { code: number }).code).to.equal(1);
    expect((failure as { stderr: string }).stderr.trim()).to.equal(
      'audit-trail: configuration error: KEY_PEPPER: is required by the api role',
    );
  });
});
