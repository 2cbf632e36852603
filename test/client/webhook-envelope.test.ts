import { expect } from 'chai';
import { buildEnvelope, type DeliveredEvent } from '../../src/client/webhookEnvelope.ts';

const event: DeliveredEvent = {
  eventId: '0195a1c2-7d00-7000-8000-000000000001',
  timestamp: '2026-12-05T06:00:00.000Z',
  action: 'phi.read',
  tenantId: 'acme',
  userId: 'dr-okafor',
  userRole: 'physician',
  resourceType: 'patient_record',
  resourceId: 'p-9',
  phiInvolved: true,
  success: false,
  details: '{"ward":"3B","count":3}',
};

/** docs/webhooks.md "The delivery request": the body a receiver parses, and verifies the signature over. */
describe('the webhook delivery body', () => {
  it('is the documented envelope, members in a fixed order, details as an object', () => {
    expect(buildEnvelope(event)).to.equal(
      '{"type":"phi.read","id":"0195a1c2-7d00-7000-8000-000000000001","timestamp":"2026-12-05T06:00:00.000Z","tenant_id":"acme",' +
        '"actor":{"user_id":"dr-okafor","user_role":"physician"},"resource":{"type":"patient_record","id":"p-9"},' +
        '"phi_involved":true,"success":false,"details":{"ward":"3B","count":3},"schema_version":"1"}',
    );
  });

  it('is the same bytes for every attempt of a delivery', () => {
    expect(buildEnvelope({ ...event })).to.equal(buildEnvelope(event));
  });

  it('carries empty details for a stored value that is not a JSON object', () => {
    for (const details of ['[1,2]', 'null', 'not json', '"text"'])
      expect(JSON.parse(buildEnvelope({ ...event, details })).details, details).to.deep.equal({});
  });
});
