import { expect } from 'chai';
import { verifyStandardWebhook, verifyWebhookSignature } from '../../src/client/webhookSignature.ts';
import type { NewEvent } from '../../src/events/eventStore.ts';
import { cli, type RunningCli, startCli } from '../support/customerCli.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/** Child processes start slowly on a loaded machine: waits on them are long, and end as soon as their condition holds. */
const PATIENCE = 30_000;

/**
 * The customer CLI's live commands, run as a child process against the real service: `events tail
 * --follow` and `listen --forward-to`, both on GET /audit/events/live. The sealer here seals when told,
 * so each test decides when events become visible to live streams.
 */
describe('audit-trail-client events tail --follow and listen, on the live endpoint', function () {
  this.timeout(90_000);
  let db: TestDatabase;
  let service: TestService;
  let sealer: TestSealer;
  const running: RunningCli[] = [];
  const receivers: TestReceiver[] = [];

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({
      databaseUrl: db.url,
      roles: ['api', 'relay', 'worker'],
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DELIVERY_RELAY_POLL_MS: '50' },
    });
    sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
  });

  afterEach(async () => {
    await Promise.all(running.splice(0).map((command) => command.stop('SIGKILL')));
  });

  after(async () => {
    await service?.stop();
    await sealer?.close();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await db?.drop();
  });

  async function tenant(tenantId: string, scopes = ['audit:read']): Promise<{ key: string; env: Record<string, string> }> {
    const { key } = await mintKey(db.url, { tenantId, scopes });
    return { key, env: { AUDIT_TRAIL_URL: service.baseUrl, AUDIT_TRAIL_API_KEY: key } };
  }

  function start(args: string[], env: Record<string, string>): RunningCli {
    const command = startCli(args, env);
    running.push(command);
    return command;
  }

  async function write(events: NewEvent[], seal = true): Promise<void> {
    await seedEvents(db.url, events);
    if (seal) await sealer.sealNow();
  }

  const idsOf = (lines: string[]): string[] => lines.map((line) => JSON.parse(line).event_id);

  it('prints the latest events oldest first, then every matching event as it is sealed, until Ctrl-C', async () => {
    const { key, env } = await tenant('tail-a');
    const T = Date.now() - 60_000;
    const backlog = [0, 1, 2].map((i) => newEvent({ tenantId: 'tail-a', occurredAtMs: T + i }));
    await write(backlog);
    const tail = start(['events', 'tail', '--follow', '--action', 'phi.read', '--limit', '2', '--output', 'ndjson'], env);
    await waitFor(() => tail.lines.length === 2, 'the backlog', PATIENCE);
    expect(idsOf(tail.lines)).to.deep.equal([backlog[1]!.eventId, backlog[2]!.eventId]);

    const later = [
      newEvent({ tenantId: 'tail-a' }),
      newEvent({ tenantId: 'tail-a', action: 'admin.login' }),
      newEvent({ tenantId: 'tail-b' }),
      newEvent({ tenantId: 'tail-a', occurredAtMs: T - 86_400_000 }),
    ];
    await write(later);
    await waitFor(() => tail.lines.length === 4, 'the two matching events written after it started', PATIENCE);
    expect(idsOf(tail.lines.slice(2))).to.deep.equal([later[0]!.eventId, later[3]!.eventId]);
    for (const line of tail.lines) expect(JSON.parse(line)).to.include({ tenant_id: 'tail-a', action: 'phi.read' });

    expect(await tail.stop('SIGINT')).to.equal(0);
    expect(tail.stderr()).to.equal('');
    expect(tail.lines.join('\n')).not.to.include(key);
  });

  it('follows on from a newest event that is not sealed yet, once it is', async () => {
    const { env } = await tenant('tail-unsealed');
    await write([newEvent({ tenantId: 'tail-unsealed', occurredAtMs: Date.now() - 1000 })]);
    const unsealed = newEvent({ tenantId: 'tail-unsealed' });
    await write([unsealed], false);
    const tail = start(['events', 'tail', '--follow', '--limit', '1', '--output', 'ndjson', '--action', 'phi.read'], env);
    await waitFor(() => tail.lines.length === 1, 'the backlog', PATIENCE);
    expect(idsOf(tail.lines)).to.deep.equal([unsealed.eventId]);
    await sealer.sealNow();
    const next = newEvent({ tenantId: 'tail-unsealed' });
    await write([next]);
    await waitFor(() => tail.lines.length === 2, 'the event after it', PATIENCE);
    expect(idsOf(tail.lines)).to.deep.equal([unsealed.eventId, next.eventId]);
    expect(await tail.stop('SIGTERM')).to.equal(0);
  });

  it('without --follow prints the latest events as a table, oldest first, and exits', async () => {
    const { env } = await tenant('tail-once');
    const T = Date.now() - 60_000;
    const events = [0, 1, 2].map((i) => newEvent({ tenantId: 'tail-once', occurredAtMs: T + i, userId: `u-${i}` }));
    await write(events);
    const result = await cli(['events', 'tail', '--limit', '2', '--action', 'phi.read'], env);
    expect(result.code, result.stderr).to.equal(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).to.match(/^TIMESTAMP\s+ACTION/);
    expect(lines.slice(1).map((line) => line.split(/\s+/)[2])).to.deep.equal(['u-1', 'u-2']);
    expect((await cli(['events', 'tail', '--follow', '--output', 'json'], env)).stderr).to.match(/--output takes table, ndjson/);
  });

  it('listen forwards each matching event to a local server, signed like a webhook delivery, in the bytes the service delivers', async () => {
    const { key, env } = await tenant('listen-a', ['audit:read', 'webhooks:write']);
    const local = await startReceiver(204);
    const hook = await startReceiver(204);
    receivers.push(local, hook);
    // A real endpoint for the same events: what listen forwards must be what a delivery carries.
    const registered = await call(`${service.baseUrl}/audit/webhooks`, { key, body: { url: hook.url, event_filter: ['phi.read'] } });
    expect(registered.status, registered.text).to.equal(201);

    const listen = start(['listen', '--forward-to', local.url, '--action', 'phi.read'], env);
    await waitFor(() => listen.lines.length >= 3, 'the ready lines', PATIENCE);
    expect(listen.lines[0]).to.equal(`Ready: forwarding live events to ${local.url}`);
    const [, secret, standard] = /^signing secret: ([0-9a-f]{64}) \(Standard Webhooks: (whsec_\S+)\)$/.exec(listen.lines[1]!) ?? [];
    expect(secret, listen.lines[1]).to.be.a('string');

    // Written as soon as it is ready: listen forwards what is sealed after the newest event at its start.
    const first = newEvent({ tenantId: 'listen-a', action: 'phi.read' });
    await write([first]);
    await waitFor(() => local.received.length === 1, 'the first event', PATIENCE);
    expect(local.received[0]!.json().id).to.equal(first.eventId);

    local.reply(500);
    const events = [
      newEvent({ tenantId: 'listen-a', action: 'phi.read', details: '{"ward":"3B"}' }),
      newEvent({ tenantId: 'listen-a', action: 'admin.login', phiInvolved: false }),
      newEvent({ tenantId: 'listen-b', action: 'phi.read' }),
    ];
    await write(events);
    const arrived = (id: string) => local.received.find((delivery) => delivery.json().id === id);
    await waitFor(() => arrived(events[0]!.eventId) !== undefined, 'the matching event', PATIENCE);
    const forwarded = arrived(events[0]!.eventId)!;
    expect(forwarded.json()).to.include({ type: 'phi.read', id: events[0]!.eventId, tenant_id: 'listen-a' });
    expect(forwarded.json().details).to.deep.equal({ ward: '3B' });
    expect(forwarded.headers['x-service-event-id']).to.equal(events[0]!.eventId);
    expect(verifyWebhookSignature(secret!, forwarded.headers['x-service-signature'] as string, forwarded.rawBody).valid).to.equal(true);
    const standardHeaders = {
      'webhook-id': forwarded.headers['webhook-id'] as string,
      'webhook-timestamp': forwarded.headers['webhook-timestamp'] as string,
      'webhook-signature': forwarded.headers['webhook-signature'] as string,
    };
    expect(verifyStandardWebhook(standard!, standardHeaders, forwarded.rawBody).valid).to.equal(true);
    await waitFor(
      () => hook.received.some((delivery) => delivery.json().id === events[0]!.eventId),
      "the service's own delivery",
      PATIENCE,
    );
    const delivered = hook.received.find((delivery) => delivery.json().id === events[0]!.eventId)!;
    expect(forwarded.rawBody.equals(delivered.rawBody)).to.equal(true);
    const lineOf = (id: string) => listen.lines.find((line) => line.includes(id));
    await waitFor(() => lineOf(events[0]!.eventId) !== undefined, 'the line of the refused event', PATIENCE);
    expect(lineOf(events[0]!.eventId)).to.match(new RegExp(`^\\S+  phi\\.read  ${events[0]!.eventId}  -> 500 \\(\\d+ ms\\)$`));

    await local.close();
    const unreachable = newEvent({ tenantId: 'listen-a', action: 'phi.read' });
    await write([unreachable]);
    await waitFor(() => lineOf(unreachable.eventId) !== undefined, 'the line of the event nobody received', PATIENCE);
    expect(lineOf(unreachable.eventId)).to.match(/ -> failed: ECONNREFUSED$/);
    // Forwarded in the stream's order: by now the events that do not match would have been, had they matched.
    expect(local.received.map((delivery) => delivery.json().id)).to.deep.equal([first.eventId, events[0]!.eventId]);
    for (const other of [events[1]!, events[2]!]) {
      expect(arrived(other.eventId)).to.equal(undefined);
      expect(lineOf(other.eventId)).to.equal(undefined);
    }

    expect(await listen.stop('SIGINT')).to.equal(0);
    expect(listen.stderr()).to.equal('');
    expect(listen.lines.join('\n')).not.to.include(key);
  });

  it('listen keeps a secret given with --secret, and refuses a missing target or a malformed secret', async () => {
    const { env } = await tenant('listen-options');
    const missing = await cli(['listen'], env);
    expect(missing).to.include({ code: 2 });
    expect(missing.stderr).to.match(/^audit-trail-client: listen needs --forward-to URL/);
    const malformed = await cli(['listen', '--forward-to', 'http://127.0.0.1:1/', '--secret', 'short'], env);
    expect(malformed).to.include({ code: 2 });
    expect(malformed.stderr).to.match(/--secret takes 64 lowercase hex characters/);
    const secret = 'ab'.repeat(32);
    const listen = start(['listen', '--forward-to', 'http://127.0.0.1:1/', '--secret', secret], env);
    await waitFor(() => listen.lines.length >= 2, 'the ready lines', PATIENCE);
    expect(listen.lines[1]).to.match(new RegExp(`^signing secret: ${secret} `));
    expect(await listen.stop('SIGINT')).to.equal(0);
  });
});
