import { expect } from 'chai';
import { verifyWebhookSignature } from '../../src/client/webhookSignature.ts';
import { SigningKeys, signedRequest } from '../../src/delivery/deliveryRequest.ts';
import { sealHeaders } from '../../src/webhooks/customHeaders.ts';
import { SecretBox, type SealedSecrets } from '../../src/webhooks/secretBox.ts';

const box = new SecretBox('33'.repeat(32));
const NOW = Date.UTC(2026, 11, 5, 6, 0, 0);
const EVENT_ID = '0195a1c2-7d00-7000-8000-000000000001';
const body = '{"type":"phi.read"}';
const sealed = (previousExpiresAtMs?: number): SealedSecrets => ({
  current: box.seal('new-secret'),
  previous: previousExpiresAtMs === undefined ? null : { ciphertext: box.seal('old-secret'), expiresAt: new Date(previousExpiresAtMs) },
  hmac: true,
  ed25519: null,
  headers: sealHeaders(box, [['X-Team', 'blue']]),
});

/** docs/webhooks.md "The delivery request": what a receiver gets with each attempt. */
describe('the request of a delivery attempt', () => {
  it('carries the endpoint’s own headers, then ours: type, agent, signatures, event id and attempt', () => {
    const signing = new SigningKeys(box).at('wh_1', sealed(), NOW);
    const { headers } = signedRequest(body, EVENT_ID, 3, signing, NOW);
    expect(Object.keys(headers)[0]).to.equal('X-Team');
    expect(headers).to.include({
      'X-Team': 'blue',
      'content-type': 'application/json',
      'x-service-event-id': EVENT_ID,
      'x-service-delivery-attempt': '3',
      'webhook-id': EVENT_ID,
      'webhook-timestamp': String(NOW / 1000),
    });
    expect(headers['user-agent']).to.match(/^audit-trail-webhooks\//);
  });

  it('is signed so that a receiver holding the endpoint’s secret verifies it, and one holding another does not', () => {
    const { headers } = signedRequest(body, EVENT_ID, 1, new SigningKeys(box).at('wh_1', sealed(), NOW), NOW);
    expect(verifyWebhookSignature('new-secret', headers['x-service-signature'], body, { now: NOW })).to.deep.equal({
      valid: true,
      timestamp: NOW / 1000,
    });
    expect(verifyWebhookSignature('old-secret', headers['x-service-signature'], body, { now: NOW }).valid).to.equal(false);
  });

  it('is signed with the replaced secret too during a rotation’s overlap, and never once it has ended', () => {
    const keys = new SigningKeys(box);
    const during = signedRequest(body, EVENT_ID, 1, keys.at('wh_1', sealed(NOW + 60_000), NOW), NOW);
    expect(verifyWebhookSignature('old-secret', during.headers['x-service-signature'], body, { now: NOW }).valid).to.equal(true);
    const after = NOW + 60_000;
    const ended = signedRequest(body, EVENT_ID, 1, keys.at('wh_1', sealed(NOW + 60_000), after), after);
    expect(verifyWebhookSignature('old-secret', ended.headers['x-service-signature'], body, { now: after }).valid).to.equal(false);
    expect(verifyWebhookSignature('new-secret', ended.headers['x-service-signature'], body, { now: after }).valid).to.equal(true);
  });
});
