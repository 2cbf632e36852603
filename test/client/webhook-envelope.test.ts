import { expect } from 'chai';
import type { AuditEvent } from '../../src/client/auditEvent.ts';
import { buildEnvelope, deliveredEventOf, type DeliveredEvent } from '../../src/client/webhookEnvelope.ts';

const EVENT: DeliveredEvent = {
  eventId: '0190c2a4-7a1e-7c3b-9a4e-1d2c3b4a5f60',
  timestamp: '2026-11-22T10:15:00.123Z',
  action: 'phi.read',
  tenantId: 'acme',
  userId: 'u-1',
  userRole: 'clinician',
  resourceType: 'patient_record',
  resourceId: 'p-9',
  phiInvolved: true,
  success: true,
  details: '{"ward":"3B"}',
};

describe('the webhook delivery body', () => {
  it('is the body docs/webhooks.md shows, byte for byte, its members in that order', () => {
    expect(buildEnvelope(EVENT)).to.equal(
      '{"type":"phi.read","id":"0190c2a4-7a1e-7c3b-9a4e-1d2c3b4a5f60","timestamp":"2026-11-22T10:15:00.123Z",' +
        '"tenant_id":"acme","actor":{"user_id":"u-1","user_role":"clinician"},"resource":{"type":"patient_record","id":"p-9"},' +
        '"phi_involved":true,"success":true,"details":{"ward":"3B"},"schema_version":"1"}',
    );
  });

  it('is the same bytes every time it is built, so that every redelivery carries them', () => {
    expect(buildEnvelope({ ...EVENT })).to.equal(buildEnvelope(EVENT));
  });

  it('carries details as an object, and an empty one for stored text that is not a JSON object', () => {
    const detailsOf = (details: string) => (JSON.parse(buildEnvelope({ ...EVENT, details })) as { details: unknown }).details;
    expect(detailsOf('{"nested":{"a":[1,2]}}')).to.deep.equal({ nested: { a: [1, 2] } });
    for (const text of ['[1,2]', 'null', '"text"', '{not json']) expect(detailsOf(text)).to.deep.equal({});
  });

  it('is built from an event as the API serves it with the same fields', () => {
    const served: AuditEvent = {
      event_id: EVENT.eventId,
      timestamp: EVENT.timestamp,
      action: EVENT.action,
      tenant_id: EVENT.tenantId,
      user_id: EVENT.userId,
      user_role: EVENT.userRole,
      resource_type: EVENT.resourceType,
      resource_id: EVENT.resourceId,
      phi_involved: EVENT.phiInvolved,
      success: EVENT.success,
      details: EVENT.details,
      fields_accessed: '["diagnosis"]',
      source_ip: '203.0.113.7',
      user_agent: 'ehr/4.2',
      justification: 'treatment',
    };
    expect(buildEnvelope(deliveredEventOf(served))).to.equal(buildEnvelope(EVENT));
  });
});
