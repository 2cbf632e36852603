import { request } from 'node:http';
import { expect } from 'chai';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { mintKey, startTestService, type TestService } from '../support/service.ts';

describe('exports keep to a duty cycle while short requests are about', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let api: TestService;
  let exporterKey: string;
  let slowExporterKey: string;
  let readerKey: string;
  const T0 = Date.now() - 3_600_000;

  const exportAll = async () => {
    const response = await fetch(`${api.baseUrl}/audit/export?format=ndjson`, {
      method: 'POST',
      headers: { authorization: `Bearer ${exporterKey}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(response.status).to.equal(200);
    return (await response.text()).split('\n').filter((line) => line !== '').length;
  };

  before(async () => {
    db = await createTestDatabase();
    // 1,000 rows of 4 KB: ten round trips of LONG_READ_FETCH_ROWS (100), each long enough to be measured.
    const bulky = JSON.stringify({ bulky: 'x'.repeat(4_000) });
    await seedEvents(
      db.url,
      Array.from({ length: 1_000 }, (_, i) => newEvent({ tenantId: 'hog', occurredAtMs: T0 + i, details: bulky })),
    );
    exporterKey = (await mintKey(db.url, { tenantId: 'hog', scopes: ['audit:export'] })).key;
    slowExporterKey = (await mintKey(db.url, { tenantId: 'slow', scopes: ['audit:export'] })).key;
    readerKey = (await mintKey(db.url, { tenantId: 'calm', scopes: ['audit:read'] })).key;
    // No yielding, so that only the duty cycle pauses; a window far longer than this file takes, so that one
    // short request keeps short traffic "about" for the second export whatever the machine's speed.
    api = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      env: { LONG_READ_YIELD: '0ms', LONG_READ_DUTY_CYCLE: '0.5', LONG_READ_DUTY_WINDOW: '60s' },
    });
  });

  /**
   * Waits until the api reports `value` of `series`, or `ms` have passed: on the fixed service the held
   * request is never counted, so this only waits long enough for the old one to have counted it.
   */
  const untilMetricOrTimeout = async (series: string, value: number, ms: number) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline && (await api.metric(series)) !== value) await new Promise((resolve) => setTimeout(resolve, 20));
  };

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  it('does not pause an export when no short request has been seen', async () => {
    // The seeded rows, and the trail's own events (the key's minting; the export before this one).
    expect(await exportAll()).to.be.within(1_000, 1_002);
    expect(await api.metric('audit_long_read_duty_pauses_total')).to.equal(0);
    expect(await api.metric('audit_long_read_duty_pause_seconds_total')).to.equal(0);
  });

  it('does not count an export request as short traffic while its body arrives', async () => {
    // Another export's request, authenticated, whose body comes slowly: not yet admitted, and no short request.
    const held = holdRequestBody(`${api.baseUrl}/audit/export?format=ndjson`, slowExporterKey, '{}');
    await untilMetricOrTimeout('audit_short_requests_in_flight', 1, 2_000);
    expect(await exportAll()).to.be.within(1_000, 1_003);
    expect(await api.metric('audit_long_read_duty_pauses_total')).to.equal(0);
    const slow = await held.finish();
    expect(slow.status).to.equal(200);
    expect(await api.metric('audit_long_read_duty_pauses_total')).to.equal(0);
  });

  it("pauses an export between its round trips after another tenant's request, and still sends every row", async () => {
    const listed = await fetch(`${api.baseUrl}/audit/events?limit=10`, { headers: { authorization: `Bearer ${readerKey}` } });
    expect(listed.status).to.equal(200);
    await listed.arrayBuffer();
    expect(await exportAll()).to.be.within(1_000, 1_004);
    const pauses = await api.metric('audit_long_read_duty_pauses_total');
    expect(pauses).to.be.at.least(1);
    // Ten gaps between eleven round trips (the last one short): never more pauses than that.
    expect(pauses).to.be.at.most(10);
    expect(await api.metric('audit_long_read_duty_pause_seconds_total')).to.be.above(0);
  });
});

/** A POST whose headers and first byte go out now, and the rest of its body when `finish` is called. */
function holdRequestBody(url: string, key: string, body: string) {
  let resolveAnswer!: (answer: { status: number; text: string }) => void;
  let rejectAnswer!: (error: Error) => void;
  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    resolveAnswer = resolve;
    rejectAnswer = reject;
  });
  const req = request(
    url,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    },
    (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolveAnswer({ status: res.statusCode ?? 0, text }));
      res.on('error', rejectAnswer);
    },
  );
  req.on('error', rejectAnswer);
  req.write(body.slice(0, 1));
  return {
    finish: () => {
      req.end(body.slice(1));
      return answer;
    },
  };
}
