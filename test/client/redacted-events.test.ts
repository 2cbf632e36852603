import { expect } from 'chai';
import { checkRedactions, REDACTION_MARKER, redactionClaim } from '../../src/client/redactedEvents.ts';

const LEAF = 'ab'.repeat(32);

/** An event as served after a redaction of `fields`, holding the marker where they say. */
function redacted(fields: string[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    event_id: 'e-1',
    justification: REDACTION_MARKER,
    details: JSON.stringify({ diagnosis: { code: REDACTION_MARKER }, ward: '3B' }),
    redaction: { fields, leaf_hash: LEAF, history: [{ reference: 'TICKET-7' }] },
    ...extra,
  };
}

describe('redacted events as a verifier reads them', () => {
  it('reads the claim of an event redacted in justification and inside details', () => {
    expect(redactionClaim(redacted(['justification', 'details.diagnosis.code']))).to.deep.equal({
      fields: ['justification', 'details.diagnosis.code'],
      leafHash: LEAF,
      references: ['TICKET-7'],
    });
  });

  it('finds no claim on an event without a redaction member', () => {
    expect(redactionClaim({ event_id: 'e-1', justification: 'care' })).to.equal(undefined);
  });

  it('gives the reason a redaction member is no redaction: no fields, no leaf hash, no marker where it says', () => {
    expect(redactionClaim(redacted([]))).to.equal('its redaction member names no fields');
    expect(redactionClaim({ ...redacted(['justification']), redaction: { fields: ['justification'], leaf_hash: 'AB' } })).to.equal(
      'its redaction member has no leaf hash',
    );
    expect(redactionClaim(redacted(['details.ward']))).to.equal('it claims details.ward is redacted but does not hold the marker there');
    expect(redactionClaim(redacted(['user_id']))).to.equal('it claims user_id is redacted but does not hold the marker there');
    expect(redactionClaim({ ...redacted(['justification']), redaction: null })).to.equal('its redaction member names no fields');
  });

  const claim = { fields: ['justification'], leafHash: LEAF, references: [] };
  const record = (eventId: string, fields: string[]) => ({
    action: 'admin.event.redact',
    details: JSON.stringify({ event_id: eventId, fields }),
  });

  it('counts a redaction recorded by a proven admin.event.redact event of the export', () => {
    const { reports, failures } = checkRedactions([{ eventId: 'e-1', claim }], [record('e-1', ['justification'])], true);
    expect(reports).to.deep.equal([{ eventId: 'e-1', fields: ['justification'], references: [], recorded: true }]);
    expect(failures).to.deep.equal([]);
  });

  it('fails an unrecorded redaction in an export of the whole trail: content changed under its cover', () => {
    const { reports, failures } = checkRedactions([{ eventId: 'e-1', claim }], [record('e-2', ['justification'])], true);
    expect(reports[0]!.recorded).to.equal(false);
    expect(failures).to.deep.equal([
      {
        eventId: 'e-1',
        reason: 'it is served redacted (justification) but no proven admin.event.redact event of the export records that redaction',
      },
    ]);
  });

  it('only reports it unrecorded in a filtered export, which may not hold the record', () => {
    const { reports, failures } = checkRedactions([{ eventId: 'e-1', claim }], [], false);
    expect([reports[0]!.recorded, failures]).to.deep.equal([false, []]);
  });

  it('takes records only from admin.event.redact events with well-formed details', () => {
    const notRecords = [
      { action: 'phi.read', details: JSON.stringify({ event_id: 'e-1', fields: ['justification'] }) },
      { action: 'admin.event.redact', details: '{broken' },
      { action: 'admin.event.redact', details: JSON.stringify({ event_id: 'e-1', fields: 'justification' }) },
    ];
    expect(checkRedactions([{ eventId: 'e-1', claim }], notRecords, true).failures).to.have.length(1);
  });
});
