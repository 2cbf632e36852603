import { expect } from 'chai';
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/** A request whose client sent its headers and holds its body back: in flight until `finish()`. */
function openSlowRequest(url: string, key: string): { finish(body: string): Promise<number>; abort(): void } {
  let answered!: (status: number) => void;
  const status = new Promise<number>((resolve) => (answered = resolve));
  const req: ClientRequest = request(
    new URL(url),
    { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': '2' } },
    (res) => {
      res.resume();
      res.on('end', () => answered(res.statusCode ?? 0));
    },
  );
  req.on('error', () => undefined);
  req.flushHeaders();
  return {
    finish(body) {
      req.end(body);
      return status;
    },
    abort: () => req.destroy(),
  };
}

/** An export whose client read its first chunk and then stopped reading: `resume()` reads the rest. */
function startExport(url: string, key: string): Promise<{ response: IncomingMessage; rest(): Promise<number> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(url),
      { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
      (res) => {
        if (res.statusCode !== 200) reject(new Error(`export answered ${res.statusCode}`));
        res.once('data', (first: Buffer) => {
          res.pause();
          const rest = () =>
            new Promise<number>((done) => {
              let bytes = first.length;
              res.on('data', (chunk: Buffer) => (bytes += chunk.length));
              res.on('end', () => done(bytes));
              res.resume();
            });
          resolve({ response: res, rest });
        });
      },
    );
    req.on('error', reject);
    req.end('{}');
  });
}

describe('exports yield to the short requests beside them', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let api: TestService;
  let exporterKey: string;
  let writerKey: string;
  const T0 = Date.now() - 3_600_000;

  before(async () => {
    db = await createTestDatabase();
    // 8 KB rows, 16 MB in all: more than the socket's and the stream's buffers hold, so the export is still
    // streaming when its client resumes.
    const bulky = JSON.stringify({ bulky: 'x'.repeat(8_000) });
    await seedEvents(
      db.url,
      Array.from({ length: 2_000 }, (_, i) => newEvent({ tenantId: 'hog', occurredAtMs: T0 + i, details: bulky })),
    );
    exporterKey = (await mintKey(db.url, { tenantId: 'hog', scopes: ['audit:export'] })).key;
    writerKey = (await mintKey(db.url, { tenantId: 'calm', scopes: ['webhooks:write'] })).key;
    // Waits of up to 10 s, for up to 90 % of an export's time: far more than the steps below take.
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { LONG_READ_YIELD: '10s', LONG_READ_YIELD_SHARE: '0.9' } });
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  it("pauses an export while another tenant's request is in flight, and ends it only after that request is answered", async () => {
    const exporting = await startExport(`${api.baseUrl}/audit/export?format=ndjson`, exporterKey);
    // An export earns its share of pausing by running (here held back by its client): after a second it may
    // pause for nine more, far longer than the rest of this test takes.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await api.metric('audit_short_requests_in_flight')).to.equal(0);

    const order: string[] = [];
    const slow = openSlowRequest(`${api.baseUrl}/audit/webhooks`, writerKey);
    try {
      await waitFor(async () => (await api.metric('audit_short_requests_in_flight')) === 1, 'the slow request to be counted');
      const rest = exporting.rest().then((bytes) => {
        order.push('export ended');
        return bytes;
      });
      await waitFor(async () => (await api.metric('audit_long_reads_yielding')) === 1, 'the export to pause for the slow request');
      expect(order, 'the export ended while a short request was in flight').to.deep.equal([]);

      const status = await slow.finish('{}');
      order.push('short request answered');
      expect(status).to.equal(422);
      const bytes = await rest;
      expect(order).to.deep.equal(['short request answered', 'export ended']);
      expect(bytes).to.be.above(16_000_000);
      expect(await api.metric('audit_long_read_yields_total')).to.be.at.least(1);
      expect(await api.metric('audit_short_requests_in_flight')).to.equal(0);
    } finally {
      slow.abort();
      exporting.response.destroy();
    }
  });
});
