import { expect } from 'chai';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';
import { CARRYING_PUBLIC_IPV4, CARRYING_REFUSED_IPV4 } from '../support/ssrfAddresses.ts';
import { insertEndpointRow } from '../support/webhookEndpoints.ts';

describe('webhook SSRF guard: registration (private targets not allowed)', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let api: TestService;
  let key: string;

  const register = (url: string) => call(`${api.baseUrl}/audit/webhooks`, { key, body: { url } });
  const storedCount = async () => (await db.pool.query('SELECT count(*)::int AS n FROM webhook_endpoints')).rows[0].n as number;

  before(async () => {
    db = await createTestDatabase();
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { WEBHOOK_ALLOW_HTTP: 'true' } });
    ({ key } = await mintKey(db.url, { tenantId: 'acme', scopes: ['audit:read', 'webhooks:write'] }));
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  const refused = [
    'http://127.0.0.1/hook',
    'http://127.1.2.3:8080/hook',
    'http://0x7f.0.0.1/hook',
    'http://2130706433/hook',
    'http://10.0.0.5/hook',
    'http://172.16.9.9/hook',
    'http://192.168.1.1/hook',
    'http://169.254.169.254/latest/meta-data/',
    'http://100.100.100.200/hook',
    'http://0.0.0.0/hook',
    'http://[::1]/hook',
    'http://[::ffff:127.0.0.1]/hook',
    'http://[::ffff:a00:1]/hook',
    'http://[fe80::1]/hook',
    'http://[fd00:ec2::254]/hook',
    'http://[::127.0.0.1]/hook',
    'https://[::169.254.169.254]/latest/meta-data/',
    'http://[64:ff9b:1::a9fe:a9fe]/hook',
    ...CARRYING_REFUSED_IPV4.map(([address]) => `https://[${address}]/hook`),
    'http://localhost/hook',
    'http://localhost.:9000/hook',
  ];
  for (const url of refused) {
    it(`refuses ${url} with 422 on url and stores nothing`, async () => {
      const before = await storedCount();
      const response = await register(url);
      expect(response.status, response.text).to.equal(422);
      expect(response.json.error).to.equal('validation_failed');
      expect(response.json.details).to.have.length(1);
      expect(response.json.details[0].field).to.equal('url');
      expect(response.json.details[0].message).to.equal('host is not a public address; webhook targets must be public addresses');
      expect(await storedCount()).to.equal(before);
    });
  }

  it('answers a name that does not resolve exactly as one that resolves inside, naming no address', async () => {
    const inside = await register('http://localhost/hook');
    const nowhere = await register('http://no-such-host.invalid/hook');
    const literal = await register('http://[::ffff:a00:1]/hook');
    expect(nowhere.status, nowhere.text).to.equal(422);
    expect(nowhere.json.details).to.deep.equal(inside.json.details);
    expect(literal.json.details).to.deep.equal(inside.json.details);
    for (const response of [inside, nowhere, literal])
      expect(response.text).not.to.match(/127\.0\.0\.1|::1|10\.0\.0\.1|loopback|private|resolve/);
  });

  it('a test send to a name that now resolves inside says only that the host is not a public address', async () => {
    // As if the name had resolved to a public address at registration and to loopback now.
    const id = `wh_${'b'.repeat(32)}`;
    await insertEndpointRow(db.pool, { id, tenantId: 'acme', url: 'http://localhost:9/hook' });
    const response = await call(`${api.baseUrl}/audit/webhooks/${id}/test`, { key, method: 'POST' });
    expect(response.status, response.text).to.equal(200);
    expect(response.json).to.deep.include({ success: false, status_code: null, error: 'target refused: host is not a public address' });
  });

  it('refuses port 0 (422 on url; nothing stored)', async () => {
    const before = await storedCount();
    for (const url of ['http://93.184.215.14:0/hook', 'https://93.184.215.14:000/hook']) {
      const response = await register(url);
      expect(response.status, `${url}: ${response.text}`).to.equal(422);
      expect(response.json.details).to.deep.equal([{ field: 'url', message: 'must not use port 0' }]);
    }
    expect(await storedCount()).to.equal(before);
  });

  for (const address of ['93.184.215.14', ...CARRYING_PUBLIC_IPV4.map(([ipv6]) => `[${ipv6}]`)]) {
    it(`accepts the public address ${address}`, async () => {
      const response = await register(`http://${address}/hook`);
      expect(response.status, response.text).to.equal(201);
    });
  }

  it('stores and returns the normalised URL, the one the guard judged', async () => {
    const cases: Array<[string, string]> = [
      ['HTTP://93.184.215.14:80/a/./b/../c?q=1', 'http://93.184.215.14/a/c?q=1'],
      ['http://0x5d.0xb8.0xd7.0x0e/hook', 'http://93.184.215.14/hook'],
      ['http://1572394766/hook', 'http://93.184.215.14/hook'],
      ['https://[::FFFF:93.184.215.14]:443', 'https://[::ffff:5db8:d70e]/'],
    ];
    for (const [given, normalised] of cases) {
      const response = await register(given);
      expect(response.status, response.text).to.equal(201);
      expect(response.json.endpoint.url).to.equal(normalised);
      const { rows } = await db.pool.query('SELECT url FROM webhook_endpoints WHERE id = $1', [response.json.endpoint.id]);
      expect(rows[0].url).to.equal(normalised);
      const listed = await call(`${api.baseUrl}/audit/webhooks`, { key });
      expect(listed.json.endpoints.find((endpoint: { id: string }) => endpoint.id === response.json.endpoint.id).url).to.equal(normalised);
    }
  });
});

describe('webhook SSRF guard: delivery (private targets not allowed)', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let target: TestReceiver;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['relay', 'worker'],
      env: { WEBHOOK_ALLOW_HTTP: 'true', DELIVERY_SCHEDULE: '200ms,200ms', DELIVERY_RELAY_POLL_MS: '50' },
    });
    target = await startReceiver(204);
  });

  after(async () => {
    await service?.stop();
    await target?.close();
    await db?.drop();
  });

  it('refuses to connect to an IPv6 literal that carries a refused IPv4 address, even for a row that got past registration', async () => {
    const { port } = new URL(target.url);
    // As if registered by an earlier version, or while WEBHOOK_ALLOW_PRIVATE_TARGETS was on.
    const literals = [
      '::7f00:1',
      '::ffff:7f00:1',
      '::ffff:0:7f00:1',
      '64:ff9b::7f00:1',
      '2002:7f00:1::1',
      '2001:0:4136:e378:8000:63bf:80ff:fffe',
    ];
    const ids = literals.map((_, index) => `wh_${String(index).padStart(32, '0')}`);
    for (const [index, literal] of literals.entries()) {
      await insertEndpointRow(db.pool, { id: ids[index]!, tenantId: `ssrf-${index}`, url: `http://[${literal}]:${port}/hook` });
    }
    await seedEvents(
      db.url,
      literals.map((_, index) => newEvent({ tenantId: `ssrf-${index}` })),
    );
    await waitFor(
      async () => {
        const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE state = 'failed' AND endpoint_id = ANY($1)`, [
          ids,
        ]);
        return rows[0].n === literals.length;
      },
      'every delivery to fail',
      30_000,
    );
    expect(target.received).to.have.length(0);
    const { rows } = await db.pool.query(
      `SELECT d.endpoint_id, a.error FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ANY($1)`,
      [ids],
    );
    expect(rows).to.have.length(literals.length * 3);
    for (const row of rows) expect(row.error, row.endpoint_id).to.equal('target refused: host is not a public address');
  });
});
