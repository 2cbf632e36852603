import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import type { StreamRegistry } from '../../src/streams/streamRegistry.ts';
import { claimStreams, recordFailure, startPosition } from '../../src/streams/streamLeaseStore.ts';
import { findStream, streamPositions, type LogStream } from '../../src/streams/streamStore.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { testLogger } from '../support/service.ts';
import { testStreamRegistry } from '../support/streamRegistry.ts';

const ACTOR = { userId: 'test', userRole: 'operator' };
const DESTINATION = { destination: { type: 'https', url: 'http://127.0.0.1:9/collect' } };

/** The streams role's lease-guarded writes, against a real database: what a process that lost a stream may not do. */
describe('log streams: the lease store', function () {
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

  /** A stream of `tenant` held by the process `owner`, as its worker sees it. */
  async function heldStream(tenant: string, owner: string): Promise<LogStream> {
    const { stream } = await registry.create(tenant, DESTINATION, ACTOR);
    const held = (await claimStreams(pool, owner, 60_000, 100)).find((each) => each.id === stream.id);
    expect(held).to.not.equal(undefined);
    return held!;
  }

  describe('the position a stream starts from', () => {
    it('is fixed the first time the holder meets the tenant, and kept after', async () => {
      const { id } = await heldStream('first', 'process-a');
      expect(await startPosition(pool, id, 'process-a', 'first', 7)).to.equal(7);
      expect(await startPosition(pool, id, 'process-a', 'first', 12)).to.equal(7);
      expect((await streamPositions(pool, id)).map((position) => position.nextLeaf)).to.deep.equal([7]);
    });

    it('is not written by a process that does not hold the stream', async () => {
      const { id } = await heldStream('other', 'process-a');
      expect(await startPosition(pool, id, 'process-b', 'other', 3)).to.equal(undefined);
      expect(await streamPositions(pool, id)).to.deep.equal([]);
    });

    it('is undefined, not a foreign-key error, for a stream deleted while its process held it', async () => {
      const { id } = await heldStream('deleted', 'process-a');
      await registry.delete('deleted', id, ACTOR);
      expect(await startPosition(pool, id, 'process-a', 'deleted', 1)).to.equal(undefined);
    });
  });

  describe('a failed batch', () => {
    it('makes the stream failing, with its reason, when its holder is refused', async () => {
      const stream = await heldStream('refused', 'process-a');
      await recordFailure(pool, stream, 'process-a', 'HTTP 403', true);
      const after = (await findStream(pool, stream.id))!;
      expect(after.failingSince).to.be.instanceOf(Date);
      expect(after.lastError).to.equal('HTTP 403');
    });

    it('leaves a stream changed since the batch was sent as the change left it: not failing, its last error kept', async () => {
      const stream = await heldStream('changed', 'process-a');
      await recordFailure(pool, stream, 'process-a', 'HTTP 403', true);
      // A pause and a resume, as new credentials would: the failing state cleared, the revision raised.
      await registry.pause('changed', stream.id, ACTOR);
      await registry.resume('changed', stream.id, ACTOR);
      const resumed = (await findStream(pool, stream.id))!;
      expect(resumed.failingSince).to.equal(null);
      expect(resumed.revision).to.be.greaterThan(stream.revision);

      // The worker of the old revision, refused once more before the runner stops it.
      await recordFailure(pool, stream, 'process-a', 'HTTP 403 again', true);
      const after = (await findStream(pool, stream.id))!;
      expect(after.failingSince).to.equal(null);
      expect(after.lastError).to.equal('HTTP 403');

      // The worker of the new revision is recorded as before.
      await recordFailure(pool, resumed, 'process-a', 'HTTP 401', true);
      expect((await findStream(pool, stream.id))!.failingSince).to.be.instanceOf(Date);
    });

    it('is not recorded by a process that does not hold the stream', async () => {
      const stream = await heldStream('taken', 'process-a');
      await recordFailure(pool, stream, 'process-b', 'HTTP 403', true);
      const after = (await findStream(pool, stream.id))!;
      expect(after.failingSince).to.equal(null);
      expect(after.lastError).to.equal(null);
    });
  });
});
