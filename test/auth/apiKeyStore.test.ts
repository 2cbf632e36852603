import { expect } from 'chai';
import { FIND_API_KEY_OR_DECOY_SQL, findApiKeyOrDecoy, insertApiKey, revokeApiKey } from '../../src/auth/apiKeyStore.ts';
import { Database } from '../../src/db/database.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { testLogger } from '../support/service.ts';

describe('findApiKeyOrDecoy reads a key or a decoy that opens nothing', () => {
  let testDb: TestDatabase;
  let db: Database;
  const decoy = { environment: 'live' as const, secretHash: Buffer.alloc(32, 0xdd) };
  const keyHash = (byte: number) => Buffer.alloc(32, byte);

  before(async () => {
    testDb = await createTestDatabase();
    db = new Database({ url: testDb.url, poolSize: 1, applicationName: 'test key store', log: testLogger() });
  });

  after(async () => {
    await db?.close();
    await testDb?.drop();
  });

  const expectDecoy = async (lookupId: string) => {
    const { found, record } = await findApiKeyOrDecoy(db, lookupId, decoy);
    expect(found, lookupId).to.equal(false);
    expect(record.lookupId).to.equal(lookupId);
    expect(record.secretHash.equals(decoy.secretHash), 'the decoy hash, never a neighbour key').to.equal(true);
    expect(record.revokedAt, 'a decoy is revoked').to.be.instanceOf(Date);
    expect([record.tenantId, record.scopes, record.allowedCidrs, record.description, record.managedBy]).to.deep.equal([
      '',
      [],
      [],
      '',
      null,
    ]);
  };

  it('answers a decoy when there are no keys at all', async () => {
    await expectDecoy('12345678');
  });

  describe('with keys', () => {
    before(async () => {
      for (const [lookupId, byte] of [
        ['20000000', 0x20],
        ['80000000', 0x80],
        ['a0000000', 0xa0],
      ] as const) {
        await insertApiKey(db, {
          lookupId,
          environment: 'live',
          secretHash: keyHash(byte),
          tenantId: `tenant-${lookupId}`,
          scopes: ['audit:read'],
          allowedCidrs: ['10.0.0.0/8'],
          description: 'a key',
          managedBy: null,
        });
      }
      await revokeApiKey(db, 'a0000000');
    });

    it('finds a key by its exact id, with its hash and not revoked', async () => {
      const { found, record } = await findApiKeyOrDecoy(db, '80000000', decoy);
      expect(found).to.equal(true);
      expect(record.secretHash.equals(keyHash(0x80))).to.equal(true);
      expect(record.revokedAt).to.equal(null);
      expect([record.tenantId, record.scopes, record.allowedCidrs]).to.deep.equal(['tenant-80000000', ['audit:read'], ['10.0.0.0/8']]);
    });

    it('finds a revoked key as revoked', async () => {
      const { found, record } = await findApiKeyOrDecoy(db, 'a0000000', decoy);
      expect(found).to.equal(true);
      expect(record.secretHash.equals(keyHash(0xa0))).to.equal(true);
      expect(record.revokedAt).to.be.instanceOf(Date);
    });

    // What keeps an unknown id's 401 as slow as a known id's in Postgres (test/auth/timing.test.ts): an equality
    // lookup fetched a heap row for a known id only, 0.6 µs that 5,000 samples told apart (BENCHMARKS.md).
    it('fetches one stored row from the heap for an unknown id, as for a known one', async () => {
      interface PlanNode {
        'Node Type': string;
        'Actual Rows': number;
        Plans?: PlanNode[];
      }
      const heapRows = (node: PlanNode): number =>
        (node['Node Type'] === 'Index Scan' ? node['Actual Rows'] : 0) +
        (node.Plans ?? []).reduce((sum, child) => sum + heapRows(child), 0);
      const fetched = async (lookupId: string) => {
        const { rows } = await db.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${FIND_API_KEY_OR_DECOY_SQL}`,
          [lookupId, decoy.environment, decoy.secretHash],
        );
        return heapRows(rows[0]!['QUERY PLAN'][0].Plan);
      };
      for (const lookupId of ['80000000', '00000000', '7fffffff', 'ffffffff']) expect(await fetched(lookupId), lookupId).to.equal(1);
    });

    it('answers a decoy for ids before the first key, between keys and past the last one', async () => {
      for (const lookupId of ['00000000', '1fffffff', '20000001', '7fffffff', '9abcdef0', 'a0000001', 'ffffffff'])
        await expectDecoy(lookupId);
    });
  });
});
