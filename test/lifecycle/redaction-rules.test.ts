import { expect } from 'chai';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { documentLeaf } from '../../src/integrity/documentLeaf.ts';
import { REDACTION_MARKER, parseRedactableFields, parseReference, redactDocument } from '../../src/lifecycle/redaction.ts';
import { ValidationError } from '../../src/platform/errors.ts';
import { newEvent } from '../support/newEvents.ts';

const event = newEvent({
  justification: 'chart review for Jane Doe',
  details: JSON.stringify({ patient_name: 'Jane Doe', visit: { ward: '3B', note: 'allergic' } }),
});
const served = renderEventDocument(event, formatTimestamp(event.occurredAtMs));
const leafHash = documentLeaf(served).toString('hex');
const request = (fields: string[], reference = 'GDPR-1') => ({ fields, reference, redactedAt: '2026-12-05T06:00:00.000Z', leafHash });

/** The problems of a refused redaction, as their messages. */
function refusal(run: () => unknown): string[] {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return (error as ValidationError).details.map((detail) => detail.message);
  }
  throw new Error('accepted');
}

/** docs/retention.md "Redaction": free text only, the marker in place, the leaf kept, every step recorded. */
describe('redacting an event’s free text', () => {
  it('redacts only the justification and values inside details, once each', () => {
    expect(parseRedactableFields([' details.patient_name', 'justification', 'details.patient_name'])).to.deep.equal([
      'details.patient_name',
      'justification',
    ]);
    expect(refusal(() => parseRedactableFields(['user_id', 'details']))).to.deep.equal([
      'user_id may not be redacted: only justification and values of details (details.<key>) can be',
      'details may not be redacted: only justification and values of details (details.<key>) can be',
    ]);
    expect(refusal(() => parseRedactableFields([' ']))).to.deep.equal(['must name at least one field']);
  });

  it('asks for a reference naming the request, not personal data', () => {
    expect(parseReference(' GDPR-1 ')).to.equal('GDPR-1');
    expect(() => parseReference('')).to.throw(ValidationError);
    expect(() => parseReference('x'.repeat(201))).to.throw(ValidationError);
  });

  it('puts the marker in place of each value, nested ones too, and records the leaf and the step', () => {
    const redacted = JSON.parse(redactDocument(served, request(['justification', 'details.visit.note'])));
    expect(redacted.justification).to.equal(REDACTION_MARKER);
    expect(JSON.parse(redacted.details)).to.deep.equal({ patient_name: 'Jane Doe', visit: { ward: '3B', note: REDACTION_MARKER } });
    expect(redacted.redaction).to.deep.equal({
      fields: ['justification', 'details.visit.note'],
      leaf_hash: leafHash,
      history: [{ fields: ['justification', 'details.visit.note'], redacted_at: '2026-12-05T06:00:00.000Z', reference: 'GDPR-1' }],
    });
    expect(Object.keys(redacted).at(-1)).to.equal('redaction');
  });

  it('extends an earlier redaction, keeping its leaf hash, and refuses a field already redacted or absent', () => {
    const once = redactDocument(served, request(['details.patient_name']));
    const twice = JSON.parse(redactDocument(once, { ...request(['justification'], 'GDPR-2'), leafHash: 'f'.repeat(64) }));
    expect(twice.redaction.fields).to.deep.equal(['details.patient_name', 'justification']);
    expect(twice.redaction.leaf_hash).to.equal(leafHash);
    expect(twice.redaction.history.map((step: { reference: string }) => step.reference)).to.deep.equal(['GDPR-1', 'GDPR-2']);
    expect(refusal(() => redactDocument(once, request(['details.patient_name'])))).to.deep.equal([
      'details.patient_name is already redacted',
    ]);
    expect(refusal(() => redactDocument(served, request(['details.visit.bed'])))).to.deep.equal(['the event has no details.visit.bed']);
  });
});
