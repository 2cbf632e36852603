import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';
import { TEST_INGEST_TOKEN, call, startTestService, type TestService } from '../support/service.ts';

const DAY = 86_400_000;

/** Events Postgres would refuse or that would create partitions at will: per-item errors, nothing stored. */
describe('hostile producer events (POST /internal/v1/events)', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let service: TestService;

  const ingestTo = (target: TestService, body: unknown) =>
    call(`${target.internalUrl}/internal/v1/events`, { method: 'POST', body, headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` } });
  const ingest = (body: unknown) => ingestTo(service, body);
  const storedCount = async () => Number(await db.pool.query('SELECT count(*) FROM events').then((result) => result.rows[0].count));
  const partitionCount = async () =>
    Number((await db.pool.query(`SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass`)).rows[0].count);
  const expectItemError = (response: { status: number; json: any; text: string }, field: string) => {
    expect(response.status, response.text).to.equal(422);
    expect(response.json.details.map((detail: { field: string }) => detail.field)).to.include(field);
  };

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({ databaseUrl: db.url, roles: ['ingest'] });
  });

  after(async () => {
    await service?.stop();
    await db?.drop();
  });

  const textFields = [
    'tenant_id',
    'action',
    'user_id',
    'user_role',
    'resource_type',
    'resource_id',
    'user_agent',
    'justification',
    'source_ip',
  ];
  for (const field of textFields) {
    it(`refuses a NUL in ${field} as a per-item error and stores nothing of the batch`, async () => {
      const before = await storedCount();
      const response = await ingest({ events: [producerEvent(), producerEvent({ [field]: 'a\u0000b' })] });
      expectItemError(response, `events.1.${field}`);
      expect(await storedCount()).to.equal(before);
    });
  }

  it('refuses a NUL inside fields_accessed and inside details, keys included', async () => {
    expectItemError(await ingest({ events: [producerEvent({ fields_accessed: ['ok', 'x\u0000'] })] }), 'events.0.fields_accessed.1');
    expectItemError(await ingest({ events: [producerEvent({ details: { note: { deep: 'x\u0000' } } })] }), 'events.0.details.note.deep');
    expectItemError(await ingest({ events: [producerEvent({ details: { 'k\u0000': 1 } })] }), 'events.0.details');
  });

  it('refuses unpaired surrogates, which the columns and the stored document would render differently', async () => {
    const body = JSON.stringify({ events: [producerEvent({ user_id: 'u\\ud800', details: undefined })] }).replace('u\\\\ud800', 'u\\ud800');
    const response = await call(`${service.internalUrl}/internal/v1/events`, {
      method: 'POST',
      body,
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json' },
    });
    expectItemError(response, 'events.0.user_id');
    // A well-formed astral character (a surrogate pair) is fine.
    expect((await ingest({ events: [producerEvent({ user_id: 'u\u{1F600}' })] })).status).to.equal(200);
  });

  it('refuses details nested 10,000 levels deep as a per-item error', async () => {
    // Written as text: JSON.stringify itself overflows the stack on such a value.
    const nested = `${'{"a":'.repeat(10_000)}{}${'}'.repeat(10_000)}`;
    const text = `{"events":[${JSON.stringify(producerEvent({ details: { placeholder: true } })).replace('{"placeholder":true}', nested)}]}`;
    const response = await call(`${service.internalUrl}/internal/v1/events`, {
      method: 'POST',
      body: text,
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json' },
    });
    expect(response.status, response.text.slice(0, 300)).to.equal(422);
    const [detail] = response.json.details;
    expect(detail.field).to.match(/^events\.0\.details/);
    expect(detail.message).to.match(/nests deeper than/);
    expect(response.text.length).to.be.below(1000);
  });

  describe('the accepted window of event times', () => {
    it('refuses events older than INGEST_MAX_EVENT_AGE (400 days by default) without creating a partition', async () => {
      const partitionsBefore = await partitionCount();
      const old = Array.from({ length: 50 }, (_, month) =>
        producerEvent({
          event_id: randomUUID(),
          timestamp: new Date(Date.UTC(1990 + Math.floor(month / 12), month % 12, 15)).toISOString(),
        }),
      );
      const response = await ingest({ events: old });
      expect(response.status).to.equal(422);
      expect(response.json.details).to.have.length(50);
      expect(response.json.details[0].message).to.match(/400 days in the past.*audit-trail import --allow-old/);
      expect(await partitionCount()).to.equal(partitionsBefore);
    });

    it('accepts an event just inside the window and refuses one more than 5 minutes ahead', async () => {
      const inside = producerEvent({ event_id: randomUUID(), timestamp: new Date(Date.now() - 399 * DAY).toISOString() });
      expect((await ingest({ events: [inside] })).status).to.equal(200);
      const ahead = producerEvent({ event_id: randomUUID(), timestamp: new Date(Date.now() + 10 * 60_000).toISOString() });
      expectItemError(await ingest({ events: [ahead] }), 'events.0.timestamp');
    });

    it('follows INGEST_MAX_EVENT_AGE and INGEST_MAX_FUTURE_SKEW', async () => {
      const narrow = await startTestService({
        databaseUrl: db.url,
        roles: ['ingest'],
        env: { INGEST_MAX_EVENT_AGE: '1d', INGEST_MAX_FUTURE_SKEW: '1s' },
      });
      try {
        const twoDaysOld = producerEvent({ event_id: randomUUID(), timestamp: new Date(Date.now() - 2 * DAY).toISOString() });
        expectItemError(await ingestTo(narrow, { events: [twoDaysOld] }), 'events.0.timestamp');
        const aMinuteAhead = producerEvent({ event_id: randomUUID(), timestamp: new Date(Date.now() + 60_000).toISOString() });
        expectItemError(await ingestTo(narrow, { events: [aMinuteAhead] }), 'events.0.timestamp');
      } finally {
        await narrow.stop();
      }
    });
  });

  describe('with the window opened for history (years 0001-0099)', () => {
    let wide: TestService;

    before(async () => {
      wide = await startTestService({ databaseUrl: db.url, roles: ['ingest', 'api'], env: { INGEST_MAX_EVENT_AGE: '1000000d' } });
    });

    after(async () => wide?.stop());

    for (const timestamp of [
      '0001-01-01T00:00:00.000Z',
      '0050-07-15T12:30:00.000Z',
      '0099-12-31T23:59:59.999Z',
      '0100-03-01T00:00:00.000Z',
    ]) {
      it(`stores ${timestamp} in the partition of its own month`, async () => {
        const eventId = randomUUID();
        const response = await ingestTo(wide, { events: [producerEvent({ event_id: eventId, timestamp })] });
        expect(response.status, response.text).to.equal(200);
        const { rows } = await db.pool.query(
          `SELECT to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at, tableoid::regclass::text AS partition
             FROM events WHERE event_id = $1`,
          [eventId],
        );
        expect(rows[0].at).to.equal(timestamp);
        expect(rows[0].partition).to.equal(`events_${timestamp.slice(0, 4)}_${timestamp.slice(5, 7)}`);
      });
    }

    it('refuses year 0000 and years past 9999', async () => {
      expectItemError(
        await ingestTo(wide, { events: [producerEvent({ event_id: randomUUID(), timestamp: '0000-06-01T00:00:00Z' })] }),
        'events.0.timestamp',
      );
      expectItemError(
        await ingestTo(wide, { events: [producerEvent({ event_id: randomUUID(), timestamp: '9999-12-31T23:59:59-14:00' })] }),
        'events.0.timestamp',
      );
    });
  });
});
