import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { connectBus, type BusConnection } from '../../src/bus/natsConnection.ts';
import { SignedHeadStream } from '../../src/integrity/signedHeadStream.ts';
import { BusNames } from '../../src/bus/jetStreamDefinitions.ts';
import { Database } from '../../src/db/database.ts';
import { checkIntegrity } from '../../src/integrity/integrityCheck.ts';
import { Sealer } from '../../src/integrity/sealer.ts';
import { TreeHeadSigner } from '../../src/integrity/treeHeadSigner.ts';
import { jetstreamManager } from '@nats-io/jetstream';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair } from '../support/integrity.ts';
import { PrivatePostgres } from '../support/private-services.ts';
import { testLogger } from '../support/service.ts';

const T0 = Date.parse('2026-12-01T08:00:00.000Z');

/**
 * One log, one history: a database brought back from an older copy under a running sealer (a private
 * Postgres, its data directory replaced by a copy taken before the last events, as a restore from backup
 * or a standby promoted while behind does) must not get a second, different head signed for sizes already
 * signed. The latest signed head per tenant lives in JetStream (a namespace of this file's own).
 */
describe('the fork guard: a restored older database never gets a diverging head signed', function () {
  this.timeout(180_000);
  let postgres: PrivatePostgres;
  let db: TestDatabase;
  let database: Database;
  let bus: BusConnection;
  let names: BusNames;
  let sealer: Sealer;
  const signer = new TreeHeadSigner(sealKeyPair().privateKey);
  const namespace = `t${randomBytes(4).toString('hex')}`;

  const heads = async (tenant: string) =>
    (
      await database.query<{ tree_size: string; root_hash: Buffer }>(
        'SELECT tree_size, root_hash FROM tree_heads WHERE tenant_id = $1 ORDER BY signed_at',
        [tenant],
      )
    ).rows;
  const newSealer = () =>
    new Sealer({
      db: database,
      signer,
      intervalMs: 3_600_000,
      heartbeatMs: 3_600_000,
      log: testLogger(),
      ledger: new SignedHeadStream(bus, names),
    });
  /** The first passes after a restart meet the pool's broken connections; the sealer retries them as its loop does. */
  const sealUntilAnswered = async (target: Sealer) => {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await target.sealPass();
      } catch (error) {
        if (attempt > 20) throw error;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  };

  before(async () => {
    postgres = await PrivatePostgres.start();
    db = await createTestDatabase(postgres.url);
    database = new Database({ url: db.url, poolSize: 2, applicationName: 'fork guard test', log: testLogger() });
    bus = await connectBus('nats://127.0.0.1:4222', 'fork guard test', testLogger());
    names = new BusNames({ namespace, deploymentId: 'forkguard001' });
    sealer = newSealer();
    await sealer.registerKey();
  });

  after(async () => {
    if (bus) {
      const jsm = await jetstreamManager(bus.nc);
      await jsm.streams.delete(names.signedHeadStream()).catch(() => undefined);
      await bus.close();
    }
    await database?.close();
    await db?.pool.end().catch(() => undefined);
    await postgres?.remove();
  });

  it('stops sealing a tenant whose restored tree diverges from the signed head; ingest and other tenants go on', async () => {
    await seedEvents(
      db.url,
      Array.from({ length: 40 }, (_, i) => newEvent({ tenantId: 'fork-a', occurredAtMs: T0 + i })),
    );
    await seedEvents(db.url, [newEvent({ tenantId: 'fork-b', occurredAtMs: T0 })]);
    await sealer.checkForks();
    await sealer.sealPass();
    expect((await heads('fork-a')).map((head) => Number(head.tree_size))).to.deep.equal([40]);

    // A base backup, taken before the last events: a copy of the stopped server's data directory.
    const data = join(postgres.directory, 'data');
    const backup = join(postgres.directory, 'backup');
    await db.pool.end();
    await postgres.stop('clean');
    execFileSync('cp', ['-a', data, backup]);
    await postgres.start();

    await seedEvents(
      db.url,
      Array.from({ length: 10 }, (_, i) => newEvent({ tenantId: 'fork-a', occurredAtMs: T0 + 1000 + i })),
    );
    await sealUntilAnswered(sealer);
    const signed = await heads('fork-a');
    expect(signed.map((head) => Number(head.tree_size))).to.deep.equal([40, 50]);

    // The primary dies; what comes back is the backup, without the last commits.
    await postgres.stop('crash');
    execFileSync('rm', ['-rf', data]);
    execFileSync('mv', [backup, data]);
    await postgres.start();

    // Other events arrive at the same sizes: the restored database would sign a different tree of 50.
    await seedEvents(
      db.url,
      Array.from({ length: 10 }, (_, i) => newEvent({ tenantId: 'fork-a', occurredAtMs: T0 + 2000 + i, resourceId: 'other' })),
    );
    await seedEvents(db.url, [newEvent({ tenantId: 'fork-b', occurredAtMs: T0 + 5 })]);
    await sealUntilAnswered(sealer);

    const after = await heads('fork-a');
    expect(after.map((head) => Number(head.tree_size))).to.deep.equal([40]);
    expect(sealer.forked.get('fork-a')?.reason).to.match(/at 50 leaves is not the tree the head signed/);
    // Ingest went on: the new events are stored, waiting.
    const waiting = await database.query<{ count: string }>("SELECT count(*) FROM events WHERE tenant_id = 'fork-a'");
    expect(Number(waiting.rows[0]!.count)).to.equal(50);
    // The other tenant's log is consistent with its signed head and goes on being sealed.
    expect((await heads('fork-b')).map((head) => Number(head.tree_size))).to.deep.equal([1, 2]);
    // integrity check says what happened, for that tenant only.
    const reports = await checkIntegrity(database, { sealIntervalMs: 3_600_000 });
    const forked = reports.flatMap((report) => report.problems.filter((problem) => problem.kind === 'tree_forked'));
    expect(forked.map((problem) => problem.tenantId)).to.deep.equal(['fork-a']);
    expect(forked[0]!.message).to.match(/the sealer stopped sealing: .*signed head of 50 leaves, database tree of 50.*The fork guard/);
    // The ledger still holds the head the world saw.
    const ledger = await new SignedHeadStream(bus, names).latest('fork-a');
    expect(ledger?.head.rootHash).to.equal(signed[1]!.root_hash.toString('hex'));
  });

  it('catches the fork at start, before signing anything, in a sealer started on the restored database', async () => {
    const restarted = newSealer();
    await restarted.checkForks();
    expect([...restarted.forked.keys()]).to.deep.equal(['fork-a']);
    const pass = await restarted.sealPass();
    expect(pass.heads).to.equal(0);
    expect((await heads('fork-a')).map((head) => Number(head.tree_size))).to.deep.equal([40]);
  });
});
