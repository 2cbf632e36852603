import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';

const run = promisify(execFile);

/** `audit-trail import`: the operator's backfill path past the producers' time window. */
describe('audit-trail import', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let directory: string;

  const cli = (...args: string[]) =>
    run(process.execPath, ['src/cli.ts', 'import', ...args], { env: { ...process.env, DATABASE_URL: db.url, LOG_LEVEL: 'warn' } });
  const fileOf = async (name: string, events: unknown[]) => {
    const path = join(directory, name);
    await writeFile(path, `${events.map((event) => (typeof event === 'string' ? event : JSON.stringify(event))).join('\n')}\n`);
    return path;
  };
  const count = async (tenant: string) =>
    Number((await db.pool.query('SELECT count(*) FROM events WHERE tenant_id = $1', [tenant])).rows[0].count);
  const historic = (tenant: string, count: number) =>
    Array.from({ length: count }, (_, index) =>
      producerEvent({
        tenant_id: tenant,
        event_id: randomUUID(),
        timestamp: new Date(Date.UTC(2015, index % 12, 10, 0, 0, index)).toISOString(),
      }),
    );

  before(async () => {
    db = await createTestDatabase();
    directory = await mkdtemp(join(tmpdir(), 'audit-import-'));
  });

  after(async () => {
    await db?.drop();
    await rm(directory, { recursive: true, force: true });
  });

  it('refuses old history without --allow-old, naming the lines, and stores nothing', async () => {
    const path = await fileOf('old.ndjson', historic('imp-old', 3));
    const failure = await cli(path).catch((error: { code: number; stderr: string }) => error);
    expect((failure as { code: number }).code).to.equal(1);
    expect((failure as { stderr: string }).stderr).to.match(/old\.ndjson:1: timestamp is more than 400 days in the past/);
    expect(await count('imp-old')).to.equal(0);
  });

  it('imports old history with --allow-old, in the right partitions, and a second run stores nothing twice', async () => {
    const events = historic('imp-backfill', 1500);
    const path = await fileOf('backfill.ndjson', events);
    const first = await cli('--allow-old', path);
    expect(JSON.parse(first.stdout)).to.deep.equal({ events: 1500, stored: 1500, duplicates: 0 });
    expect(first.stderr).to.match(/imported 1000 of 1500 events/);
    expect(first.stderr).to.match(/imported 1500 of 1500 events/);
    expect(await count('imp-backfill')).to.equal(1500);
    const { rows } = await db.pool.query(
      `SELECT DISTINCT tableoid::regclass::text AS partition FROM events WHERE tenant_id = 'imp-backfill' ORDER BY 1`,
    );
    expect(rows.map((row) => row.partition)).to.deep.equal(
      Array.from({ length: 12 }, (_, month) => `events_2015_${String(month + 1).padStart(2, '0')}`),
    );

    const again = await cli('--allow-old', path);
    expect(JSON.parse(again.stdout)).to.deep.equal({ events: 1500, stored: 0, duplicates: 1500 });
  });

  it('checks the whole file first: one bad line anywhere and nothing is stored', async () => {
    const events: unknown[] = historic('imp-bad', 5);
    events.push('not json', producerEvent({ tenant_id: 'imp-bad', timestamp: '2015-01-01T00:00:00Z' }), {
      ...(events[0] as object),
      user_id: 'x\u0000',
    });
    const path = await fileOf('bad.ndjson', events);
    const failure = (await cli('--allow-old', path).catch((error: unknown) => error)) as { code: number; stderr: string };
    expect(failure.code).to.equal(1);
    expect(failure.stderr).to.include('bad.ndjson:6: (line) is not a JSON object');
    expect(failure.stderr).to.include('bad.ndjson:7: event_id is required for an import');
    expect(failure.stderr).to.include('bad.ndjson:8: user_id must not contain the NUL character');
    expect(await count('imp-bad')).to.equal(0);
  });
});
