import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent, seedEvents } from '../support/events.ts';
import { freePort } from '../support/ports.ts';
import { TEST_ENCRYPTION_KEY, TEST_PEPPER, call, mintKey } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

describe('graceful shutdown on SIGTERM', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let child: ChildProcess | undefined;

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, Array.from({ length: 3000 }, () => newEvent({ tenantId: 'drain' })));
  });

  after(async () => {
    child?.kill('SIGKILL');
    await db?.drop();
  });

  it('finishes the requests in flight, then exits 0', async () => {
    const [port, internalPort] = [await freePort(), await freePort()];
    child = spawn(process.execPath, ['src/cli.ts', 'serve', '--roles', 'api'], {
      env: { ...process.env, DATABASE_URL: db.url, KEY_PEPPER: TEST_PEPPER, SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, PORT: String(port), INTERNAL_PORT: String(internalPort), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const exited = once(child, 'exit');
    await waitFor(async () => (await call(`http://127.0.0.1:${internalPort}/readyz`).catch(() => ({ status: 0 }))).status === 200, 'service ready');
    const { key } = await mintKey(db.url, { tenantId: 'drain', scopes: ['audit:read'] });
    const url = `http://127.0.0.1:${port}/api/v2/public/audit/events?limit=1000`;
    // Warm the key cache, so the in-flight requests below are past accept when the signal lands.
    expect((await call(url, { key })).status).to.equal(200);

    const inFlight = Array.from({ length: 20 }, () => call(url, { key }).then((response) => response.status, () => 'connection error'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const signalled = Date.now();
    child.kill('SIGTERM');
    const statuses = await Promise.all(inFlight);
    const [code] = await exited;
    expect(code).to.equal(0);
    // Well within the 10 s grace period: idle keep-alive connections are closed as they drain.
    expect(Date.now() - signalled).to.be.below(5_000);
    expect(statuses.filter((status) => status !== 200 && status !== 'connection error')).to.deep.equal([]);
    expect(statuses.filter((status) => status === 200).length).to.be.greaterThan(0);
    // After exit nothing listens any more.
    const after = await call(url, { key }).then(() => 'answered', () => 'refused');
    expect(after).to.equal('refused');
  });
});
