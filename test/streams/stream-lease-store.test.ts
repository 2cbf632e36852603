import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import type { StreamRegistry } from '../../src/streams/streamRegistry.ts';
import { claimStreams, startPosition } from '../../src/streams/streamLeaseStore.ts';
import { streamPositions } from '../../src/streams/streamStore.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { testLogger } from '../support/service.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';

const ACTOR = { userId: 'test', userRole: 'operator' };
const DESTINATION = { destination: { type: 'https', url: 'http://127.0.0.1:9/collect' } };

/** The streams role's lease-guarded writes, against a real database: what a process that lost a stream may not do. */
describe('log streams: the position a stream starts from', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let pool: Database;
  let registry: StreamRegistry;

  before(async () => {
    db = await createTestDatabase();
    pool = new Database({ url: db.url, poolSize: 2, applicationName: 'lease store test', log: testLogger() });
    registry = testStreamRegistry(pool);
  });
  after(async () => {
    await pool?.close();
    await db?.drop();
  });

  /** A stream of `tenant` held by the process `owner`. */
  async function heldStream(tenant: string, owner: string): Promise<string> {
    const { stream } = await registry.create(tenant, DESTINATION, ACTOR);
    const held = await claimStreams(pool, owner, 60_000, 100);
    expect(held.map((each) => each.id)).to.include(stream.id);
    return stream.id;
  }

  it('is fixed the first time the holder meets the tenant, and kept after', async () => {
    const id = await heldStream('first', 'process-a');
    expect(await startPosition(pool, id, 'process-a', 'first', 7)).to.equal(7);
    expect(await startPosition(pool, id, 'process-a', 'first', 12)).to.equal(7);
    expect((await streamPositions(pool, id)).map((position) => position.nextLeaf)).to.deep.equal([7]);
  });

  it('is not written by a process that does not hold the stream', async () => {
    const id = await heldStream('other', 'process-a');
    expect(await startPosition(pool, id, 'process-b', 'other', 3)).to.equal(undefined);
    expect(await streamPositions(pool, id)).to.deep.equal([]);
  });

  it('is undefined, not a foreign-key error, for a stream deleted while its process held it', async () => {
    const id = await heldStream('deleted', 'process-a');
    await registry.delete('deleted', id, ACTOR);
    expect(await startPosition(pool, id, 'process-a', 'deleted', 1)).to.equal(undefined);
  });
});
