import { expect } from 'chai';
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LongReadSlots } from '../../src/platform/longReadSlots.ts';
import { TooManyLongReadsError } from '../../src/platform/errors.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

describe('LongReadSlots', () => {
  const refusals: string[] = [];
  let active = 0;
  const slots = () =>
    new LongReadSlots({ perTenant: 2, perInstance: 3 }, { active: (delta) => (active += delta), refused: (limit) => refusals.push(limit) });

  beforeEach(() => {
    refusals.length = 0;
    active = 0;
  });

  it('admits up to the per-tenant cap, then refuses that tenant with its cap named', () => {
    const gate = slots();
    gate.take('a', 'exports');
    gate.take('a', 'exports');
    let refused: unknown;
    try {
      gate.take('a', 'exports');
    } catch (error) {
      refused = error;
    }
    expect(refused).to.be.instanceOf(TooManyLongReadsError);
    expect((refused as TooManyLongReadsError).bodyExtras()).to.deep.equal({ limit: 2, retry_after_s: 2 });
    expect(refusals).to.deep.equal(['tenant']);
    expect(gate.inProgress('a')).to.equal(2);
  });

  it('refuses every tenant once the instance cap is reached', () => {
    const gate = slots();
    gate.take('a', 'exports');
    gate.take('b', 'exports');
    gate.take('c', 'exports');
    expect(() => gate.take('d', 'exports')).to.throw(TooManyLongReadsError, /instance/);
    expect(refusals).to.deep.equal(['instance']);
    expect(active).to.equal(3);
  });

  it('gives a released slot back once, however often release is called', () => {
    const gate = slots();
    const first = gate.take('a', 'exports');
    gate.take('a', 'exports');
    first.release();
    first.release();
    expect(gate.inProgress('a')).to.equal(1);
    expect(gate.inProgress()).to.equal(1);
    expect(active).to.equal(1);
    gate.take('a', 'exports');
    expect(() => gate.take('a', 'exports')).to.throw(TooManyLongReadsError);
  });

  it('refuses limits that could never admit anything', () => {
    expect(() => new LongReadSlots({ perTenant: 0, perInstance: 1 })).to.throw(RangeError);
    expect(() => new LongReadSlots({ perTenant: 3, perInstance: 2 })).to.throw(RangeError);
  });
});

/** An export whose client reads one chunk and then nothing: the server is held back by backpressure. */
interface HeldExport {
  readonly response: IncomingMessage;
  abort(): void;
}

function holdExport(url: string, key: string): Promise<HeldExport> {
  return new Promise((resolve, reject) => {
    let req: ClientRequest;
    req = request(
      new URL(url),
      { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
      (res) => {
        if (res.statusCode !== 200) reject(new Error(`export answered ${res.statusCode}`));
        res.once('data', () => {
          res.pause();
          resolve({ response: res, abort: () => req.destroy() });
        });
      },
    );
    req.on('error', () => undefined);
    req.end('{}');
  });
}

describe('long reads: exports cannot take the connections short reads need', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let api: TestService;
  const keys: Record<string, string> = {};
  const T0 = Date.now() - 3_600_000;

  before(async () => {
    db = await createTestDatabase();
    // Rows large enough (8 KB each, 16 MB per tenant) that an export cannot fit in the socket's and the
    // stream's buffers: a client that stops reading holds its export open.
    const bulky = JSON.stringify({ bulky: 'x'.repeat(8_000) });
    for (const tenant of ['hog', 'calm', 'third']) {
      await seedEvents(
        db.url,
        Array.from({ length: 2_000 }, (_, i) => newEvent({ tenantId: tenant, occurredAtMs: T0 + i, details: bulky })),
      );
      keys[tenant] = (await mintKey(db.url, { tenantId: tenant, scopes: ['audit:export', 'audit:read'] })).key;
    }
    // Two connections for short reads and writes only: any export holding one of them would starve the lists.
    api = await startTestService({
      databaseUrl: db.url,
      roles: ['api'],
      env: { DATABASE_POOL_SIZE: '2', LONG_READS_PER_TENANT: '1', LONG_READS_PER_POD: '2' },
    });
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  const exportUrl = () => `${api.baseUrl}/audit/export?format=ndjson`;
  const exportBy = (tenant: string) => call(exportUrl(), { key: keys[tenant], body: {} });
  const exportsRecorded = async (tenant: string) =>
    (await db.pool.query(`SELECT count(*)::int AS n FROM events WHERE tenant_id = $1 AND action = 'audit.export'`, [tenant])).rows[0].n;

  it("answers a tenant's export past its cap with 429 concurrent_exports and Retry-After, and records nothing for it", async () => {
    const held = await holdExport(exportUrl(), keys.hog!);
    try {
      const recordedBefore = await exportsRecorded('hog');
      const refused = await exportBy('hog');
      expect(refused.status).to.equal(429);
      expect(refused.headers.get('retry-after')).to.equal('2');
      expect(refused.json).to.include({ error: 'concurrent_exports', limit: 1, retry_after_s: 2 });
      expect(refused.json.message).to.match(/already has 1 exports running/);
      expect(await exportsRecorded('hog')).to.equal(recordedBefore);
      expect(await api.metric('audit_long_reads_refused_total{limit="tenant"}')).to.be.at.least(1);
      expect(await api.metric('audit_long_reads_active')).to.equal(1);
    } finally {
      held.abort();
    }
  });

  it("keeps every tenant's lists and lookups prompt while exports hold every long-read slot", async () => {
    const held = [await holdExport(exportUrl(), keys.hog!), await holdExport(exportUrl(), keys.calm!)];
    try {
      // The instance's cap: a third tenant waits too.
      const third = await exportBy('third');
      expect(third.status).to.equal(429);
      expect(third.json.error).to.equal('concurrent_exports');
      expect(third.json.message).to.match(/instance/);
      expect(await api.metric('audit_long_reads_refused_total{limit="instance"}')).to.be.at.least(1);
      // Short reads of everyone, several at once on a pool of two: none waits behind the exports.
      const started = performance.now();
      const lists = await Promise.all(
        ['hog', 'calm', 'third', 'hog', 'calm', 'third'].map((tenant) =>
          call(`${api.baseUrl}/audit/events?limit=5`, { key: keys[tenant] }),
        ),
      );
      expect(lists.map((list) => list.status)).to.deep.equal([200, 200, 200, 200, 200, 200]);
      expect(performance.now() - started).to.be.below(2_000);
    } finally {
      for (const export_ of held) export_.abort();
    }
  });

  it('gives the slot back when the client goes away, and the next export runs to its end', async () => {
    const held = await holdExport(exportUrl(), keys.hog!);
    held.abort();
    await waitFor(async () => (await api.metric('audit_long_reads_active')) === 0, 'the abandoned export to give its slot back');
    // The tenant's own events, without the audit.export events the earlier exports wrote.
    const next = await call(exportUrl(), { key: keys.hog, body: { until: new Date(T0 + 2_000).toISOString() } });
    expect(next.status).to.equal(200);
    expect(next.text.trimEnd().split('\n')).to.have.length(2_000);
    await waitFor(async () => (await api.metric('audit_long_reads_active')) === 0, 'the finished export to give its slot back');
  });

  it('gives the slot back when the export fails before its first byte', async () => {
    const invalid = await call(exportUrl(), { key: keys.hog, body: { since: 'yesterday' } });
    expect(invalid.status).to.equal(422);
    expect(await api.metric('audit_long_reads_active')).to.equal(0);
    // proofs=true for a tenant nothing of which is sealed still answers, and then lets go.
    const proven = await call(`${api.baseUrl}/audit/export?proofs=true`, {
      key: keys.third,
      body: { until: new Date(T0 + 10).toISOString() },
    });
    expect(proven.status).to.equal(200);
    await waitFor(async () => (await api.metric('audit_long_reads_active')) === 0, 'the slot to be given back');
  });
});

describe('an export with proofs streams: its memory does not grow with its size', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let api: TestService;
  let key: string;

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(
      db.url,
      Array.from({ length: 10_000 }, (_, i) => newEvent({ tenantId: 'proven', occurredAtMs: Date.now() - 3_600_000 + i * 3 })),
    );
    const sealer = await startTestSealer(db.url, sealKeyPair().privateKey);
    await sealer.sealNow();
    await sealer.close();
    key = (await mintKey(db.url, { tenantId: 'proven', scopes: ['audit:export'] })).key;
    api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: { LONG_READS_PER_TENANT: '4' } });
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  it('holds a few MB for four exports of 17 MB whose clients have stopped reading', async () => {
    // The test and the service share this process: the live heap after a full collection is what the
    // exports hold (the clients buffer nothing: they stopped reading, the kernel holds the rest).
    setFlagsFromString('--expose-gc');
    const collect = runInNewContext('gc') as () => void;
    collect();
    const before = process.memoryUsage().heapUsed;
    const url = `${api.baseUrl}/audit/export?format=ndjson&proofs=true`;
    const held = await Promise.all([holdExport(url, key), holdExport(url, key), holdExport(url, key), holdExport(url, key)]);
    try {
      // Each export runs until backpressure stops it: its connection then waits idle in its transaction
      // for the next FETCH, and no FETCH runs between two looks (state_change unchanged).
      let previous = '';
      await waitFor(
        async () => {
          const { rows } = await db.pool.query(
            `SELECT pid, state, state_change FROM pg_stat_activity
              WHERE datname = current_database() AND application_name LIKE '%long-reads' ORDER BY pid`,
          );
          const seen = JSON.stringify(rows);
          const stalled = rows.filter((row) => row.state === 'idle in transaction').length >= 4 && seen === previous;
          previous = seen;
          return stalled;
        },
        'the four exports to stall on backpressure',
        15_000,
        250,
      );
      collect();
      const grownMb = (process.memoryUsage().heapUsed - before) / 1_048_576;
      expect(grownMb, 'heap held by four stalled exports with proofs').to.be.below(24);
      // And what they hold is a stream, not a whole export: each one's rest is still to come.
      const rest = await new Promise<number>((resolve) => {
        let bytes = 0;
        held[0]!.response.on('data', (chunk: Buffer) => (bytes += chunk.length));
        held[0]!.response.on('end', () => resolve(bytes));
        held[0]!.response.resume();
      });
      expect(rest).to.be.above(10 * 1_048_576);
    } finally {
      for (const export_ of held) export_.abort();
    }
  });
});
