import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { spawnInFreshShell } from '../support/freshShell.ts';
import { freePort } from '../support/ports.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

describe('examples/receiver.ts', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let service: TestService;
  let receiver: ChildProcess | undefined;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'relay', 'worker'],
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_RELAY_POLL_MS: '50' },
    });
  });

  after(async () => {
    receiver?.kill('SIGKILL');
    await service?.stop();
    await db?.drop();
  });

  it('starts as the README says from a fresh shell, verifies and acknowledges real deliveries, refuses a forged one', async () => {
    const port = await freePort();
    const { key } = await mintKey(db.url, { tenantId: 'example', scopes: ['webhooks:write'] });
    const registered = await call(`${service.baseUrl}/audit/webhooks`, {
      key,
      body: { url: `http://127.0.0.1:${port}/`, event_filter: ['phi.'] },
    });
    expect(registered.status).to.equal(201);

    let output = '';
    // The README's command, on the machine's own node: npm puts the project's Node 24 first on PATH.
    receiver = spawnInFreshShell(`WEBHOOK_SECRET=${registered.json.secret} PORT=${port} exec npm run receiver`);
    receiver.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    receiver.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitFor(() => output.includes('listening'), 'the receiver to listen');

    const event = newEvent({ tenantId: 'example', action: 'phi.read' });
    await seedEvents(db.url, [event]);
    await waitFor(() => output.includes(event.eventId), 'the receiver to log the event');
    // The worker records the outcome after the receiver's answer arrives.
    await waitFor(async () => {
      const { rows } = await db.pool.query(`SELECT state FROM deliveries WHERE event_id = $1`, [event.eventId]);
      return rows[0]?.state === 'succeeded';
    }, 'the delivery to be recorded as succeeded');

    const forged = await fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-service-signature': `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}` },
      body: '{"type":"phi.read","id":"x"}',
    });
    expect(forged.status).to.equal(401);

    // Stopped like a background job (kill %1): the signal npm passes on reaches the receiver itself.
    const exited = once(receiver, 'exit');
    receiver.kill('SIGTERM');
    await exited;
    const afterStop = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST' }).then(
      () => 'answered',
      () => 'refused',
    );
    expect(afterStop).to.equal('refused');
  });
});
