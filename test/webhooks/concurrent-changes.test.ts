import { expect } from 'chai';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

/**
 * Concurrent changes of one tenant's endpoints once deadlocked (40P01 → 500): a deletion locked its row and
 * then, for its admin event's fan-out, every other endpoint of the tenant, while a second deletion did the
 * same the other way round.
 */
describe('concurrent webhook changes of one tenant', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let api: TestService;
  let key: string;

  const hooks = () => `${api.baseUrl}/audit/webhooks`;
  const register = (index: number) => call(hooks(), { key, body: { url: `https://hooks.example.com/${index}` } });

  before(async () => {
    db = await createTestDatabase();
    api = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      // The documented limits are per minute (docs/api.md); this test makes a few hundred calls in seconds.
      env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', RATE_LIMIT_WRITE_PER_MINUTE: '100000', RATE_LIMIT_READ_PER_MINUTE: '100000' },
    });
    ({ key } = await mintKey(db.url, { tenantId: 'busy', scopes: ['audit:read', 'webhooks:write'] }));
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  it('answers ten concurrent creates, disables and deletes without a single 5xx, round after round', async () => {
    const statuses: number[] = [];
    for (let round = 0; round < 8; round += 1) {
      const created = await Promise.all(Array.from({ length: 10 }, (_, index) => register(round * 100 + index)));
      expect(created.map((response) => response.status)).to.deep.equal(Array(10).fill(201));
      const ids = created.map((response) => response.json.endpoint.id as string);
      const changes = await Promise.all([
        ...ids.slice(0, 6).map((id) => call(`${hooks()}/${id}`, { key, method: 'DELETE' })),
        ...ids.slice(6).map((id) => call(`${hooks()}/${id}/disable`, { key, method: 'POST' })),
        ...Array.from({ length: 4 }, (_, index) => register(round * 100 + 50 + index)),
      ]);
      statuses.push(...changes.map((response) => response.status));
      // Leave room under the 100-endpoint limit for the next round.
      const { json } = await call(hooks(), { key });
      await Promise.all(json.endpoints.map((endpoint: { id: string }) => call(`${hooks()}/${endpoint.id}`, { key, method: 'DELETE' })));
    }
    expect(statuses.filter((status) => status >= 500)).to.deep.equal([]);
    expect(new Set(statuses)).to.deep.equal(new Set([204, 200, 201]));
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM webhook_endpoints`);
    expect(rows[0].n).to.equal(0);
  });
});
