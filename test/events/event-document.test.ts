import { expect } from 'chai';
import { AUDIT_EVENT_FIELDS } from '../../src/client/auditEvent.ts';
import { canonicalJson } from '../../src/client/canonicalJson.ts';
import { hashLeafHex } from '../../src/client/merkleHash.ts';
import { documentOfParts, renderEvent, renderEventDocument } from '../../src/events/eventDocument.ts';
import { newEvent } from '../support/newEvents.ts';

const TIMESTAMP = '2026-12-05T12:00:00.123Z';

describe('the stored event document', () => {
  const event = newEvent({
    eventId: '0190c2a4-7a1e-7c3b-9a4e-1d2c3b4a5f60',
    tenantId: 'acme',
    justification: 'quote " backslash \\ newline \n tab \t bell \u0007 é 😀',
    details: '{"ward":"3B"}',
    phiInvolved: true,
    success: false,
  });

  it('is the API’s event: every field in the order of AUDIT_EVENT_FIELDS, each value as the API gives it', () => {
    const document = renderEventDocument(event, TIMESTAMP);
    const parsed = JSON.parse(document) as Record<string, unknown>;
    expect(Object.keys(parsed)).to.deep.equal(Object.keys(AUDIT_EVENT_FIELDS));
    expect(parsed).to.deep.include({
      event_id: event.eventId,
      timestamp: TIMESTAMP,
      tenant_id: 'acme',
      justification: event.justification,
      details: '{"ward":"3B"}',
      phi_involved: true,
      success: false,
    });
  });

  it('escapes as JSON.stringify does, so that Postgres’ to_json renders the same bytes', () => {
    const document = renderEventDocument(event, TIMESTAMP);
    expect(document).to.include(`"justification":${JSON.stringify(event.justification)}`);
    expect([...document].some((character) => character.charCodeAt(0) < 0x20)).to.equal(false);
  });

  it('hashes to the leaf of its RFC 8785 form, computed here by parsing and canonicalising it', () => {
    const rendered = renderEvent(event, TIMESTAMP);
    expect(rendered.document).to.equal(renderEventDocument(event, TIMESTAMP));
    expect(rendered.leafHash).to.equal(hashLeafHex(canonicalJson(JSON.parse(rendered.document))));
  });

  it('is put together again, byte for byte, from a compact row’s values and its four columns', () => {
    const rendered = renderEvent(event, TIMESTAMP);
    expect(rendered.values.split('\u001f')).to.have.length(11);
    expect(documentOfParts([null, rendered.values, event.eventId, event.action, event.phiInvolved, event.tenantId])).to.equal(
      rendered.document,
    );
  });

  it('serves a stored document as it is, and names the event whose row holds neither form', () => {
    expect(documentOfParts(['{"kept":"as written"}', null, 'e-1', 'phi.read', true, 'acme'])).to.equal('{"kept":"as written"}');
    expect(() => documentOfParts([null, null, 'e-1', 'phi.read', true, 'acme'])).to.throw('event e-1 has neither a document nor values');
    expect(() => documentOfParts([null, 'a\u001fb', 'e-1', 'phi.read', true, 'acme'])).to.throw('event e-1 stores 2 values, not 11');
  });
});
