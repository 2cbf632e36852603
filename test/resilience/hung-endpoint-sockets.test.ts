import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { expect } from 'chai';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { HungEndpointBed, HUNG_TIMEOUT_MS as TIMEOUT_MS } from '../support/hungEndpointBed.ts';
import { waitFor } from '../support/wait.ts';

/**
 * Hung endpoints by the hundred (issue 28): the sockets they hold are capped, and the worker's event loop stays
 * quick. Its bound is a latency, so scripts/run-suite.ts runs this file alone; the rest of the hung endpoint's
 * behaviour is hung-endpoint.test.ts's.
 */
describe('a hundred hung webhook endpoints of one tenant', function () {
  this.timeout(120_000);
  let bed: HungEndpointBed;

  before(async () => {
    bed = await HungEndpointBed.start();
  });

  after(() => bed?.remove());

  /**
   * An idle Node process measuring its own event-loop delay until stopped: the machine's share of the delay
   * a busy process sees (issue 28's 100 ms bound is for the service's own stalls).
   */
  function idleEventLoopDelay(): { stop(): Promise<number> } {
    const script = `const h = require('node:perf_hooks').monitorEventLoopDelay({ resolution: 10 }); h.enable();
      process.stdin.on('data', () => { h.disable(); process.stdout.write(String(h.percentile(99) / 1e6)); process.exit(0); });`;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    return {
      async stop() {
        const exited = once(child, 'exit');
        child.stdin.write('stop');
        await exited;
        return Number(output);
      },
    };
  }

  it("holds at most DELIVERY_MAX_SOCKETS with 100 hung endpoints of one tenant; the event loop stays under 100 ms p99 and another tenant's endpoint gets its deliveries promptly @latency", async () => {
    const HUNG = 100;
    const MAX_SOCKETS = 200;
    // Each event of the hostile tenant goes to its 100 endpoints: 3,000 deliveries, 16 slots per endpoint
    // asked for (1,600 sockets without the cap, as in the 93 endpoints holding 1,517).
    const { db, endpoints } = await bed.deployment([
      ...Array.from({ length: HUNG }, () => ({ tenantId: 'hostile', reply: 'hang' as const })),
      { tenantId: 'healthy', reply: 204 },
    ]);
    const hung = endpoints.slice(0, HUNG);
    const healthy = endpoints[HUNG]!;
    // The relay and the worker in a process of their own: its event loop is the worker's, not this one's with
    // its 101 receivers. Its metrics' event-loop percentiles start afresh at each scrape (prom-client).
    const metrics = await bed.serveInChild(db, { DELIVERY_ENDPOINT_CONCURRENCY: '16', DELIVERY_MAX_SOCKETS: String(MAX_SOCKETS) });
    await seedEvents(
      db.url,
      Array.from({ length: 30 }, () => newEvent({ tenantId: 'hostile' })),
    );
    const sockets = () => hung.reduce((sum, endpoint) => sum + endpoint.receiver.openConnections(), 0);
    await waitFor(() => sockets() >= MAX_SOCKETS / 2, 'the hung endpoints to hold sockets', 30_000);

    const idle = idleEventLoopDelay();
    await metrics('nodejs_eventloop_lag_p99_seconds'); // the window starts here
    let mostSockets = 0;
    const latencies: number[] = [];
    const seen = healthy.receiver.received.length;
    // Two request time limits of the hung endpoints: their requests end, their slots are taken again.
    const until = Date.now() + 2 * TIMEOUT_MS + 1_000;
    const writer = new EventWriter(bed.pool(db, 1), WEBHOOK_FAN_OUT);
    for (let round = 1; Date.now() < until; round += 1) {
      const written = Date.now();
      await writer.write([newEvent({ tenantId: 'healthy' })], 'test');
      await waitFor(() => healthy.receiver.received.length === seen + round, 'the healthy delivery', 10_000, 5);
      latencies.push(healthy.receiver.received[seen + round - 1]!.receivedAt - written);
      mostSockets = Math.max(mostSockets, sockets());
    }
    const p99Ms = (await metrics('nodejs_eventloop_lag_p99_seconds')) * 1000;
    const idleP99Ms = await idle.stop();
    const figures = JSON.stringify({ p99Ms, idleP99Ms, mostSockets, latencies });
    expect(mostSockets, figures).to.be.at.most(MAX_SOCKETS);
    // The service's own stalls, not the machine's: what an idle process on the same cores saw over the same
    // window (its scheduling delay under other processes' load) is not the worker's doing. Measured: 16-18 ms
    // p99 with the cap (idle 12-14 ms); without it, 1,600 sockets and 92 ms (idle 17 ms).
    expect(p99Ms - idleP99Ms, figures).to.be.below(100);
    // Prompt: as in hung-endpoint.test.ts, each within a second of being written.
    expect(Math.max(...latencies), figures).to.be.below(1_000);
    expect(await metrics('audit_webhook_deliveries_parked_total'), figures).to.be.above(0);
    expect(await metrics('audit_webhook_requests_in_flight'), figures).to.be.within(1, MAX_SOCKETS);
  });
});
