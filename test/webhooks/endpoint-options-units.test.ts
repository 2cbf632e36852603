import { expect } from 'chai';
import { generateKeyPairSync, verify } from 'node:crypto';
import {
  asymmetricSignatureOf,
  ed25519PublicKey,
  ed25519SigningKey,
  publicKeyText,
  rawPublicKey,
} from '../../src/client/webhookEd25519.ts';
import { verifyStandardWebhook } from '../../src/client/index.ts';
import { signatureHeaders } from '../../src/client/webhookSigning.ts';
import { burstOf, grantPermits, intervalOf } from '../../src/delivery/endpointRateLimit.ts';
import { applyHeaderChanges, customHeadersSchema, headerNameProblem } from '../../src/webhooks/customHeaders.ts';

describe('custom headers', () => {
  const reserved = [
    'Host',
    'Content-Type',
    'content-length',
    'Content-Encoding',
    'Transfer-Encoding',
    'Connection',
    'Keep-Alive',
    'Upgrade',
    'TE',
    'Trailer',
    'Proxy-Authorization',
    'User-Agent',
    'X-Service-Signature',
    'x-service-event-id',
    'X-Service-Delivery-Attempt',
    'X-Service-Anything',
    'webhook-id',
    'Webhook-Timestamp',
    'webhook-signature',
  ];
  for (const name of reserved) {
    it(`refuses the reserved name ${name}`, () => {
      expect(headerNameProblem(name)).to.match(/^is reserved/);
    });
  }

  it('accepts what gateways ask for: Authorization, an API key header, a team tag', () => {
    for (const name of ['Authorization', 'X-Api-Key', 'X-Team']) expect(headerNameProblem(name)).to.equal(undefined);
  });

  it('refuses names that are not HTTP tokens and values that could split the request', () => {
    for (const name of ['X Team', 'X:Team', '', 'x'.repeat(65)]) expect(headerNameProblem(name)).to.match(/HTTP header name/);
    for (const value of ['a\r\nX-Evil: 1', 'a\nb', ' leading', 'trailing ', '', 'é']) {
      expect(customHeadersSchema.safeParse({ 'X-Team': value }).success, JSON.stringify(value)).to.equal(false);
    }
    expect(customHeadersSchema.safeParse({ 'X-Team': 'a b\tc' }).success).to.equal(true);
  });

  it('refuses the same name twice in another case, and more than ten headers', () => {
    expect(customHeadersSchema.safeParse({ 'X-Team': 'a', 'x-team': 'b' }).success).to.equal(false);
    const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, index) => [`X-H${index}`, 'v']));
    expect(customHeadersSchema.safeParse(eleven).success).to.equal(false);
  });

  it('applies changes by name, whatever the case: sets, replaces in place, removes, keeps the others', () => {
    const current = [
      ['Authorization', 'Bearer a'],
      ['X-Team', 'blue'],
    ] as const;
    expect(applyHeaderChanges(current, { authorization: 'Bearer b', 'X-Team': null, 'X-New': '1' })).to.deep.equal([
      ['authorization', 'Bearer b'],
      ['X-New', '1'],
    ]);
    const ten = Array.from({ length: 10 }, (_, index) => [`X-H${index}`, 'v'] as const);
    expect(applyHeaderChanges(ten, { 'X-Eleventh': 'v' })).to.equal(undefined);
  });
});

describe('endpoint rate limits: the permit rule (GCRA)', () => {
  const second = 1_000_000;

  it('grants a burst at once, then one permit per interval', () => {
    const interval = intervalOf(100);
    const first = grantPermits(0, 0, interval, burstOf(100), 50);
    expect(first.granted).to.equal(10);
    expect(first.retryInMs).to.equal(10);
    const tooSoon = grantPermits(first.tatUs, 5_000, interval, 10, 50);
    expect(tooSoon.granted).to.equal(0);
    const later = grantPermits(first.tatUs, 50_000, interval, 10, 50);
    expect(later.granted).to.equal(5);
  });

  it('never grants more than rate + burst in any second, asked for as often as one likes', () => {
    const rate = 7;
    const interval = intervalOf(rate);
    let tat = 0;
    const starts: number[] = [];
    for (let now = 0; now < 10 * second; now += 3_000) {
      const grant = grantPermits(tat, now, interval, burstOf(rate), 5);
      tat = grant.tatUs;
      for (let index = 0; index < grant.granted; index += 1) starts.push(now);
    }
    for (const start of starts) {
      const inWindow = starts.filter((other) => other >= start && other < start + second).length;
      expect(inWindow).to.be.at.most(rate + burstOf(rate));
    }
    // And it does not fall short: about the rate over the ten seconds.
    expect(starts.length).to.be.within(10 * rate - 1, 10 * rate + burstOf(rate));
  });

  it('says when to ask again: when the next permit is free', () => {
    const grant = grantPermits(0, 0, intervalOf(2), 1, 3);
    expect(grant.granted).to.equal(1);
    expect(grant.retryInMs).to.equal(500);
  });
});

describe('Ed25519 (v1a) signatures', () => {
  // Standard Webhooks' published example (libraries/go/webhook_asymmetric_test.go, TestAsymmetricWebhookSign):
  // the seed, message id, timestamp and payload, and the signature its reference implementation produces.
  const seed = Buffer.from('VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=', 'base64');
  const published = 'v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag==';

  it("signs Standard Webhooks' published example exactly as its reference implementation does", () => {
    const signature = asymmetricSignatureOf(ed25519SigningKey(seed), 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    expect(`v1a,${signature.toString('base64')}`).to.equal(published);
  });

  it('verifies the published example with the whpk_ public key, and refuses it for another body or key', () => {
    const publicKey = publicKeyText(rawPublicKey(ed25519SigningKey(seed)));
    const headers = { 'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek', 'webhook-timestamp': '1614265330', 'webhook-signature': published };
    const at = { now: 1614265330_000 };
    expect(verifyStandardWebhook(publicKey, headers, '{"test": 2432232314}', at)).to.deep.equal({ valid: true, timestamp: 1614265330 });
    expect(verifyStandardWebhook(publicKey, headers, '{"test": 2432232315}', at)).to.deep.equal({
      valid: false,
      reason: 'signature_mismatch',
    });
    const other = publicKeyText(rawPublicKey(ed25519SigningKey(Buffer.alloc(32, 7))));
    expect(verifyStandardWebhook(other, headers, '{"test": 2432232314}', at)).to.deep.equal({ valid: false, reason: 'signature_mismatch' });
  });

  it('signs beside HMAC in one webhook-signature header, and alone without X-Service-Signature', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const body = '{"type":"phi.read"}';
    const both = signatureHeaders(['a'.repeat(64)], 'evt-1', body, 1_700_000_000_000, [privateKey]);
    const entries = both['webhook-signature']!.split(' ');
    expect(entries.map((entry) => entry.split(',')[0])).to.deep.equal(['v1', 'v1a']);
    const signature = Buffer.from(entries[1]!.slice('v1a,'.length), 'base64');
    expect(verify(null, Buffer.from(`evt-1.1700000000.${body}`), publicKey, signature)).to.equal(true);
    expect(both['x-service-signature']).to.match(/^t=1700000000,v1=[0-9a-f]{64}$/);
    const alone = signatureHeaders([], 'evt-1', body, 1_700_000_000_000, [privateKey]);
    expect(alone).not.to.have.property('x-service-signature');
    expect(alone['webhook-signature']).to.match(/^v1a,\S+$/);
    expect(rawPublicKey(ed25519PublicKey(publicKeyText(rawPublicKey(privateKey))))).to.deep.equal(rawPublicKey(publicKey));
  });
});
