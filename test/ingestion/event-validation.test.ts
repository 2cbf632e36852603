import { expect } from 'chai';
import { ValidationError } from '../../src/platform/errors.ts';
import { MAX_BATCH_SIZE, parseEvent, parseEventBatch } from '../../src/ingestion/eventInput.ts';

const DAY = 86_400_000;
const WINDOW = { maxAgeMs: 400 * DAY, maxFutureSkewMs: 5 * 60_000 };
const NOW = Date.parse('2026-12-05T12:00:00.000Z');
const MINIMAL = {
  tenant_id: 'acme',
  action: 'phi.read',
  user_id: 'u-1',
  user_role: 'clinician',
  resource_type: 'patient_record',
  resource_id: 'p-9',
  phi_involved: false,
  success: true,
};

/** The details of the 422 that `run` throws. */
function problemsOf(run: () => unknown): Array<{ field: string; message: string }> {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return [...(error as ValidationError).details];
  }
  throw new Error('accepted');
}

describe('validating a producer’s events', () => {
  it('fills what the producer left out as docs/api.md says: a UUIDv7 of now, "" and "{}"', () => {
    const event = parseEvent(MINIMAL, WINDOW, NOW);
    expect(event).to.deep.include({
      tenantId: 'acme',
      occurredAtMs: NOW,
      fieldsAccessed: '',
      sourceIp: '',
      userAgent: '',
      justification: '',
      details: '{}',
    });
    expect(event.eventId).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('keeps a given id in lowercase with its timestamp, details as JSON text, fields accessed of a PHI event', () => {
    const event = parseEvent(
      {
        ...MINIMAL,
        event_id: '0190C2A4-7A1E-7C3B-9A4E-1D2C3B4A5F60',
        timestamp: '2026-12-05T13:00:00.5+01:00',
        phi_involved: true,
        fields_accessed: ['diagnosis'],
        details: { ward: '3B' },
      },
      WINDOW,
      NOW,
    );
    expect(event).to.deep.include({
      eventId: '0190c2a4-7a1e-7c3b-9a4e-1d2c3b4a5f60',
      occurredAtMs: NOW + 500,
      fieldsAccessed: '["diagnosis"]',
      details: '{"ward":"3B"}',
    });
  });

  it('refuses an event_id without a timestamp: a retry would not be recognised as the same event', () => {
    expect(problemsOf(() => parseEvent({ ...MINIMAL, event_id: '0190c2a4-7a1e-7c3b-9a4e-1d2c3b4a5f60' }, WINDOW, NOW))).to.deep.equal([
      { field: 'timestamp', message: 'is required with event_id, so that a retried event is recognised as the same event' },
    ]);
  });

  it('refuses fields accessed on an event that involved no PHI', () => {
    expect(problemsOf(() => parseEvent({ ...MINIMAL, fields_accessed: ['x'] }, WINDOW, NOW))).to.deep.equal([
      { field: 'fields_accessed', message: 'is only recorded for PHI events (phi_involved: true)' },
    ]);
  });

  it('words each field’s problem: tenant, action, address, timestamp, unknown field', () => {
    const problems = problemsOf(() =>
      parseEvent(
        { ...MINIMAL, tenant_id: '-acme', action: 'PHI Read', source_ip: '999.1.1.1', timestamp: 'yesterday', extra: 1 },
        WINDOW,
        NOW,
      ),
    );
    expect(problems).to.deep.include.members([
      { field: 'tenant_id', message: 'must be 1-64 letters, digits, _ or -, starting with a letter or digit' },
      { field: 'action', message: 'must be a dotted lowercase action such as phi.read' },
      { field: 'source_ip', message: 'must be an IPv4 or IPv6 address' },
      { field: 'timestamp', message: 'must be an RFC 3339 timestamp with Z or an offset' },
      { field: 'extra', message: 'is not a known field' },
    ]);
  });

  it('refuses details past 16 KiB once serialised', () => {
    expect(problemsOf(() => parseEvent({ ...MINIMAL, details: { text: 'x'.repeat(16 * 1024) } }, WINDOW, NOW))).to.deep.equal([
      { field: 'details', message: 'must serialise to at most 16384 bytes' },
    ]);
  });

  it('refuses times outside the window, in words, pointing older history to the operator’s import', () => {
    const at = (ms: number) => ({ ...MINIMAL, timestamp: new Date(ms).toISOString() });
    expect(problemsOf(() => parseEvent(at(NOW + 6 * 60_000), WINDOW, NOW, 'events.2'))).to.deep.equal([
      { field: 'events.2.timestamp', message: 'is more than 5 minutes in the future' },
    ]);
    expect(problemsOf(() => parseEvent(at(NOW - 401 * DAY), WINDOW, NOW))).to.deep.equal([
      {
        field: 'timestamp',
        message: 'is more than 400 days in the past; older history is imported by an operator (audit-trail import --allow-old)',
      },
    ]);
    expect(parseEvent(at(NOW - 401 * DAY), { ...WINDOW, maxAgeMs: Number.POSITIVE_INFINITY }, NOW).occurredAtMs).to.equal(NOW - 401 * DAY);
  });

  it('refuses a whole batch for one bad event, naming each problem by its index', () => {
    const error = (() => {
      try {
        parseEventBatch([MINIMAL, { ...MINIMAL, action: '' }, MINIMAL, { ...MINIMAL, user_id: 7 }], WINDOW);
      } catch (thrown) {
        return thrown as ValidationError;
      }
      throw new Error('accepted');
    })();
    expect(error.message).to.equal('2 of 4 events are invalid; none were stored');
    expect(error.details.map((detail) => detail.field)).to.deep.equal(['events.1.action', 'events.1.action', 'events.3.user_id']);
  });

  it(`refuses a batch of more than ${MAX_BATCH_SIZE} events before looking at them`, () => {
    expect(problemsOf(() => parseEventBatch(new Array(MAX_BATCH_SIZE + 1).fill(null), WINDOW))).to.deep.equal([
      { field: 'events', message: `must hold at most ${MAX_BATCH_SIZE} events` },
    ]);
    expect(parseEventBatch(new Array(3).fill(MINIMAL), WINDOW)).to.have.length(3);
  });
});
