import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { publicKeyText, rawPublicKey } from '../../src/client/webhookEd25519.ts';
import { standardWebhooksSecretOf, verifyStandardWebhook, verifyWebhookSignature } from '../../src/client/webhookSignature.ts';
import { signatureHeaders, signDelivery } from '../../src/client/webhookSigning.ts';

const SECRET = 'ab'.repeat(32);
const OLD_SECRET = 'cd'.repeat(32);
const BODY = '{"type":"phi.read","id":"e-1"}';
const NOW = 1_800_000_000_000;

// The Standard Webhooks headers with HMAC (v1): what a receiver using any Standard Webhooks library checks.
describe('Standard Webhooks signatures (v1, HMAC)', () => {
  it('verifies the specification’s own example with its whsec_ secret', () => {
    const headers = {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    };
    const options = { now: 1614265330_000 };
    expect(verifyStandardWebhook('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', headers, '{"test": 2432232314}', options)).to.deep.equal({
      valid: true,
      timestamp: 1614265330,
    });
    expect(verifyStandardWebhook('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', headers, '{"test": 2432232315}', options)).to.deep.equal({
      valid: false,
      reason: 'signature_mismatch',
    });
  });

  it('signs what a receiver verifies with the secret as issued or in its whsec_ form', () => {
    const headers = signatureHeaders([SECRET], 'e-1', BODY, NOW);
    for (const key of [SECRET, standardWebhooksSecretOf(SECRET)])
      expect(verifyStandardWebhook(key, headers, BODY, { now: NOW })).to.deep.equal({ valid: true, timestamp: NOW / 1000 });
    expect(standardWebhooksSecretOf(SECRET)).to.equal(`whsec_${Buffer.from(SECRET).toString('base64')}`);
  });

  it('signs with every secret of a rotation, newest first, so a receiver holding either verifies', () => {
    const headers = signatureHeaders([SECRET, OLD_SECRET], 'e-1', BODY, NOW);
    expect(headers['webhook-signature']!.split(' ')).to.have.length(2);
    expect(verifyStandardWebhook(OLD_SECRET, headers, BODY, { now: NOW }).valid).to.equal(true);
    expect(verifyWebhookSignature(OLD_SECRET, headers['x-service-signature'], BODY, { now: NOW }).valid).to.equal(true);
    expect(headers['x-service-signature']).to.equal(signDelivery([SECRET, OLD_SECRET], BODY, NOW));
  });

  it('refuses another id, an old timestamp, missing headers, and a header with only another scheme', () => {
    const headers = signatureHeaders([SECRET], 'e-1', BODY, NOW);
    expect(verifyStandardWebhook(SECRET, { ...headers, 'webhook-id': 'e-2' }, BODY, { now: NOW }).valid).to.equal(false);
    expect(verifyStandardWebhook(SECRET, headers, BODY, { now: NOW + 301_000 })).to.deep.equal({
      valid: false,
      reason: 'timestamp_out_of_tolerance',
    });
    expect(verifyStandardWebhook(SECRET, headers, BODY, { now: NOW + 301_000, toleranceS: 600 }).valid).to.equal(true);
    expect(verifyStandardWebhook(SECRET, { 'webhook-id': 'e-1' }, BODY, { now: NOW })).to.deep.equal({
      valid: false,
      reason: 'malformed_header',
    });
    expect(verifyStandardWebhook(SECRET, { ...headers, 'webhook-timestamp': 'soon' }, BODY, { now: NOW })).to.deep.equal({
      valid: false,
      reason: 'malformed_header',
    });
    const { privateKey } = generateKeyPairSync('ed25519');
    const asymmetricOnly = signatureHeaders([], 'e-1', BODY, NOW, [privateKey]);
    expect(asymmetricOnly['x-service-signature']).to.equal(undefined);
    expect(verifyStandardWebhook(SECRET, asymmetricOnly, BODY, { now: NOW })).to.deep.equal({ valid: false, reason: 'malformed_header' });
    expect(verifyStandardWebhook(publicKeyText(rawPublicKey(privateKey)), asymmetricOnly, BODY, { now: NOW }).valid).to.equal(true);
  });
});
