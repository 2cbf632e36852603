import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { PrivateRedis } from '../support/private-services.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { untilInstant, waitFor } from '../support/wait.ts';

describe('per-key rate limits', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  // The last test stops Redis: every service of this file uses a Redis of its own.
  let redis: PrivateRedis;

  before(async () => {
    redis = await PrivateRedis.start();
    db = await createTestDatabase();
  });

  after(async () => {
    await db?.drop();
    await redis?.remove();
  });

  /** A fresh budget namespace per service group, so tests never share counters. */
  const isolated = (extra: Record<string, string> = {}) => ({
    REDIS_URL: redis.url,
    RATE_LIMIT_KEY_PREFIX: `test:${randomBytes(4).toString('hex')}`,
    ...extra,
  });
  const readKey = () => mintKey(db.url, { tenantId: 'limits', scopes: ['audit:read', 'audit:export'] }).then((minted) => minted.key);

  describe('with the documented limits (1,000 reads a minute)', () => {
    let api: TestService;
    before(async () => {
      api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: isolated() });
    });
    after(() => api?.stop());

    it('refuses the 1,001st read in a minute and not the 1,000th, with the documented body and headers', async () => {
      const key = await readKey();
      const url = `${api.baseUrl}/audit/events?limit=1`;
      const statuses: number[] = [];
      for (let batch = 0; batch < 10; batch += 1) {
        const responses = await Promise.all(Array.from({ length: 100 }, () => call(url, { key })));
        statuses.push(...responses.map((response) => response.status));
      }
      expect(statuses.filter((status) => status === 200)).to.have.length(1000);
      const last = await call(url, { key });
      expect(last.status).to.equal(429);
      expect(Object.keys(last.json)).to.deep.equal(['error', 'scope', 'retry_after_s']);
      expect(last.json.error).to.equal('rate_limit_exceeded');
      expect(last.json.scope).to.equal('read');
      expect(last.json.retry_after_s).to.be.within(1, 60);
      expect(last.headers.get('retry-after')).to.equal(String(last.json.retry_after_s));
      expect(last.headers.get('ratelimit-limit')).to.equal('1000');
      expect(last.headers.get('ratelimit-remaining')).to.equal('0');
      expect(Number(last.headers.get('ratelimit-reset'))).to.be.within(1, 60);
    });

    it('puts RateLimit headers on every authenticated response', async () => {
      const key = await readKey();
      const first = await call(`${api.baseUrl}/audit/events`, { key });
      expect(first.headers.get('ratelimit-limit')).to.equal('1000');
      expect(first.headers.get('ratelimit-remaining')).to.equal('999');
      const second = await call(`${api.baseUrl}/audit/events`, { key });
      expect(second.headers.get('ratelimit-remaining')).to.equal('998');
      const unauthenticated = await call(`${api.baseUrl}/audit/events`);
      expect(unauthenticated.headers.get('ratelimit-limit')).to.equal(null);
    });
  });

  describe('with small limits', () => {
    const SMALL_LIMITS = { RATE_LIMIT_READ_PER_MINUTE: '5', RATE_LIMIT_WRITE_PER_MINUTE: '3', RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '4' };
    let api: TestService;
    let twin: TestService;

    // A full minute's window: a budget spent by a test stays spent however slowly a busy machine runs it.
    before(async () => {
      // One budget namespace for both instances: they share it through Redis.
      const env = isolated(SMALL_LIMITS);
      api = await startTestService({ databaseUrl: db.url, roles: ['api'], env });
      twin = await startTestService({ databaseUrl: db.url, roles: ['api'], env });
    });
    after(async () => {
      await api?.stop();
      await twin?.stop();
    });

    const exportCall = (base: string, key: string) => call(`${base}/audit/export`, { key, body: {} });
    const read = (base: string, key: string) => call(`${base}/audit/events?limit=1`, { key });

    it('tells a truthful Retry-After: a request after it succeeds', async () => {
      // A 2-second window, so that waiting it out is short.
      const brief = await startTestService({
        databaseUrl: db.url,
        roles: ['api'],
        env: isolated({ ...SMALL_LIMITS, RATE_LIMIT_WINDOW_SECONDS: '2' }),
      });
      try {
        const key = await readKey();
        const statuses = [];
        for (let i = 0; i < 6; i += 1) statuses.push(await read(brief.baseUrl, key));
        const refused = statuses.find((response) => response.status === 429);
        expect(refused, 'one of 6 reads refused').not.to.equal(undefined);
        const refusedAt = Date.now();
        const wait = Number(refused!.headers.get('retry-after'));
        expect(wait).to.be.within(1, 2);
        await untilInstant(refusedAt + wait * 1000);
        expect((await read(brief.baseUrl, key)).status).to.equal(200);
      } finally {
        await brief.stop();
      }
    });

    it('keeps the write bucket (export) separate from the read bucket', async () => {
      const key = await readKey();
      for (let i = 0; i < 6; i += 1) await read(api.baseUrl, key);
      expect((await read(api.baseUrl, key)).status).to.equal(429);
      const exported = await exportCall(api.baseUrl, key);
      expect(exported.status).to.equal(200);
      expect(exported.headers.get('ratelimit-limit')).to.equal('3');
      await exportCall(api.baseUrl, key);
      await exportCall(api.baseUrl, key);
      const refused = await exportCall(api.baseUrl, key);
      expect(refused.status).to.equal(429);
      expect(refused.json.scope).to.equal('write');
    });

    it('gives two keys of one tenant independent budgets', async () => {
      const first = await readKey();
      const second = await readKey();
      for (let i = 0; i < 6; i += 1) await read(api.baseUrl, first);
      expect((await read(api.baseUrl, first)).status).to.equal(429);
      expect((await read(api.baseUrl, second)).status).to.equal(200);
    });

    it('shares one budget between two api instances', async () => {
      const key = await readKey();
      const statuses = [];
      for (let i = 0; i < 6; i += 1) statuses.push((await read(i % 2 ? api.baseUrl : twin.baseUrl, key)).status);
      expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 429]);
    });

    it('limits repeated failed authentication from one address without refusing valid keys', async () => {
      const valid = await readKey();
      const statuses = [];
      for (let i = 0; i < 6; i += 1) {
        statuses.push((await call(`${api.baseUrl}/audit/events`, { key: `atr_live_0000000${i}_${'0'.repeat(32)}` })).status);
      }
      expect(statuses).to.deep.equal([401, 401, 401, 401, 429, 429]);
      const limited = await call(`${api.baseUrl}/audit/events`, { key: 'garbage' });
      expect(limited.json).to.include({ error: 'rate_limit_exceeded', scope: 'auth' });
      expect((await read(api.baseUrl, valid)).status).to.equal(200);
    });

    it('keeps serving under per-instance limits while Redis is down, and shares state again when it returns', async () => {
      const key = await readKey();
      expect((await read(api.baseUrl, key)).status).to.equal(200);
      await redis.stop();
      try {
        const during = [];
        for (let i = 0; i < 6; i += 1) during.push((await read(api.baseUrl, key)).status);
        // The in-memory fallback still enforces the limit, per instance; never a 500.
        expect(during.slice(0, 5)).to.deep.equal([200, 200, 200, 200, 200]);
        expect(during[5]).to.equal(429);
        expect((await read(twin.baseUrl, key)).status).to.equal(200);

        const readiness = await call(`${api.internalUrl}/readyz`);
        expect(readiness.status).to.equal(200);
        expect(readiness.json.status).to.equal('degraded');
        expect(readiness.json.checks.redis).to.include({ ok: false, critical: false });
        const metrics = await call(`${api.internalUrl}/metrics`);
        expect(metrics.text).to.match(/^audit_rate_limiter_fallback_active 1$/m);
      } finally {
        await redis.start();
      }
      // ioredis reconnects in the background; shared limits resume on the first answered command.
      for (const instance of [api, twin]) {
        await waitFor(
          async () => (await call(`${instance.internalUrl}/readyz`)).json.status === 'ready',
          'Redis to be back in use',
          15_000,
          100,
        );
      }
      // The restarted Redis kept nothing: a fresh shared budget, spent alternately through both instances.
      const after = [];
      for (let i = 0; i < 6; i += 1) after.push((await read(i % 2 ? api.baseUrl : twin.baseUrl, key)).status);
      expect(after).to.deep.equal([200, 200, 200, 200, 200, 429]);
      expect(await api.metric('audit_rate_limiter_fallback_active')).to.equal(0);
    });
  });
});
