import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';
import { TEST_INGEST_TOKEN, call, startTestService, type TestService } from '../support/service.ts';

describe('POST /internal/v1/events (batch ingestion)', () => {
  let db: TestDatabase;
  let service: TestService;

  const ingest = (body: unknown, headers: Record<string, string> = {}) =>
    call(`${service.internalUrl}/internal/v1/events`, {
      method: 'POST',
      body,
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, ...headers },
    });
  const countEvents = async (tenantId: string) =>
    Number((await db.pool.query('SELECT count(*) FROM events WHERE tenant_id = $1', [tenantId])).rows[0].count);

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({ databaseUrl: db.url, roles: ['ingest'] });
  });

  after(async () => {
    await service?.stop();
    await db?.drop();
  });

  it('stores a batch and fills what the producer left out', async () => {
    const response = await ingest({
      events: [
        producerEvent({ tenant_id: 'ing-a' }),
        producerEvent({ tenant_id: 'ing-a', phi_involved: false, fields_accessed: undefined, details: undefined, source_ip: undefined }),
      ],
    });
    expect(response.status, response.text).to.equal(200);
    expect(response.json.stored).to.equal(2);
    expect(response.json.duplicates).to.equal(0);
    const [first, second] = response.json.events;
    // Assigned ids are UUIDv7 (time-ordered) and timestamps are the ingest time at millisecond precision.
    expect(first.event_id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(first.timestamp).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(Math.abs(Date.parse(first.timestamp) - Date.now())).to.be.below(10_000);

    const { rows } = await db.pool.query('SELECT * FROM event_fields WHERE event_id = $1', [second.event_id]);
    expect(rows[0]).to.deep.include({ fields_accessed: '', details: '{}', source_ip: '', justification: '', phi_involved: false });
    const phiRow = (await db.pool.query('SELECT fields_accessed FROM event_fields WHERE event_id = $1', [first.event_id])).rows[0];
    expect(JSON.parse(phiRow.fields_accessed)).to.deep.equal(['diagnosis']);
  });

  it('is idempotent for producer-supplied event_id and timestamp', async () => {
    const event = producerEvent({ tenant_id: 'ing-idem', event_id: randomUUID(), timestamp: '2026-11-02T10:00:00.123Z' });
    const first = await ingest({ events: [event, producerEvent({ tenant_id: 'ing-idem' })] });
    expect(first.json.stored).to.equal(2);
    const retry = await ingest({ events: [event] });
    expect(retry.status).to.equal(200);
    expect(retry.json).to.deep.include({ stored: 0, duplicates: 1 });
    expect(retry.json.events[0]).to.deep.equal({ event_id: event.event_id, timestamp: '2026-11-02T10:00:00.123Z', status: 'duplicate' });
    // A repeat inside one batch is stored once too.
    const twice = producerEvent({ tenant_id: 'ing-idem', event_id: randomUUID(), timestamp: '2026-11-02T10:00:01.000Z' });
    const repeated = await ingest({ events: [twice, twice] });
    expect(repeated.json.stored).to.equal(1);
    expect(await countEvents('ing-idem')).to.equal(3);
  });

  it('stores an event dated in a month that has no partition yet', async () => {
    // Migration 001 creates last month's partition onwards; ten months ago is inside the accepted window.
    const tenMonthsAgo = new Date();
    tenMonthsAgo.setUTCMonth(tenMonthsAgo.getUTCMonth() - 10, 15);
    const month = tenMonthsAgo.toISOString().slice(0, 7);
    const event = producerEvent({ tenant_id: 'ing-old', event_id: randomUUID(), timestamp: `${month}-15T08:30:00.000+01:00` });
    const response = await ingest({ events: [event] });
    expect(response.status, response.text).to.equal(200);
    const { rows } = await db.pool.query(`SELECT tableoid::regclass::text AS partition FROM events WHERE event_id = $1`, [event.event_id]);
    expect(rows[0].partition).to.equal(`events_${month.replace('-', '_')}`);
  });

  it('rejects the whole batch with one error per invalid field of each invalid item', async () => {
    const response = await ingest({
      events: [
        producerEvent({ tenant_id: 'ing-bad' }),
        producerEvent({ tenant_id: 'ing-bad', action: 'Not An Action', phi_involved: 'yes' }),
        producerEvent({ tenant_id: 'ing-bad', event_id: randomUUID() }),
        producerEvent({ tenant_id: 'ing-bad', colour: 'blue' }),
        producerEvent({ tenant_id: 'ing bad' }),
        producerEvent({ tenant_id: 'ing-bad', phi_involved: false, fields_accessed: ['ssn'] }),
        producerEvent({ tenant_id: 'ing-bad', timestamp: new Date(Date.now() + 3_600_000).toISOString() }),
        producerEvent({ tenant_id: 'ing-bad', source_ip: 'localhost' }),
        producerEvent({ tenant_id: 'ing-bad', details: 'not an object' }),
        producerEvent({ tenant_id: 'ing-bad', timestamp: '2026-02-30T10:00:00Z' }),
        producerEvent({ tenant_id: 'ing-bad', details: { note: 'x'.repeat(16 * 1024) } }),
      ],
    });
    expect(response.status).to.equal(422);
    expect(response.json.error).to.equal('validation_failed');
    const fields = response.json.details.map((detail: { field: string }) => detail.field);
    expect(fields).to.have.members([
      'events.1.action',
      'events.1.phi_involved',
      'events.2.timestamp',
      'events.3.colour',
      'events.4.tenant_id',
      'events.5.fields_accessed',
      'events.6.timestamp',
      'events.7.source_ip',
      'events.8.details',
      'events.9.timestamp',
      'events.10.details',
    ]);
    const messageOf = (field: string) => response.json.details.find((detail: { field: string }) => detail.field === field).message;
    expect(messageOf('events.9.timestamp')).to.equal('must be an RFC 3339 timestamp with Z or an offset');
    expect(messageOf('events.10.details')).to.equal('must serialise to at most 16384 bytes');
    expect(await countEvents('ing-bad')).to.equal(0);
  });

  it('caps a batch at 1,000 events', async () => {
    const events = Array.from({ length: 1001 }, () => producerEvent({ tenant_id: 'ing-cap' }));
    const response = await ingest({ events });
    expect(response.status).to.equal(422);
    expect(response.json.details[0]).to.deep.equal({ field: 'events', message: 'must hold at most 1000 events' });
    const accepted = await ingest({ events: events.slice(0, 1000) });
    expect(accepted.json.stored).to.equal(1000);
  });

  it('refuses bodies that are not a JSON batch', async () => {
    expect((await ingest('{"events": [', {})).status).to.equal(400);
    expect((await ingest('events', { 'content-type': 'text/plain' })).status).to.equal(415);
    expect((await ingest({ events: [] })).status).to.equal(422);
    expect((await ingest({ events: [producerEvent()], extra: 1 })).status).to.equal(422);
    expect((await ingest([producerEvent()])).status).to.equal(422);
  });

  it('requires a configured ingest token', async () => {
    for (const authorization of ['', 'Bearer wrong-token-wrong-token-wrong', `Basic ${TEST_INGEST_TOKEN}`]) {
      const response = await call(`${service.internalUrl}/internal/v1/events`, {
        method: 'POST',
        body: { events: [producerEvent({ tenant_id: 'ing-auth' })] },
        headers: authorization ? { authorization } : {},
      });
      expect(response.status).to.equal(401);
      expect(response.text).to.equal('{"error":"unauthorized"}');
    }
    expect(await countEvents('ing-auth')).to.equal(0);
  });

  it('counts ingested events in /metrics', async () => {
    const metrics = await call(`${service.internalUrl}/metrics`);
    expect(metrics.text).to.match(/audit_events_ingested_total\{source="http"\} \d+/);
    expect(metrics.text).to.include(
      'audit_http_request_duration_seconds_bucket{le="0.005",route="/internal/v1/events",method="POST",status="200"}',
    );
  });
});
