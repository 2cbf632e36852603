import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import { verifyWebhookSignature } from '../../src/client/index.ts';
import { signDelivery } from '../../src/client/webhookSigning.ts';

const SECRET = '3f'.repeat(32);
const BODY = '{"type":"phi.read","id":"0190c2a4-7a1e-7c3b-9a4e-1d2c3b4a5f60"}';
const NOW = Date.parse('2026-11-22T12:00:00Z');
const T = NOW / 1000;

function header(secret: string, t: number, body: string): string {
  return `t=${t},v1=${createHmac('sha256', secret).update(`t=${t}.${body}`).digest('hex')}`;
}

describe('verifyWebhookSignature', () => {
  it('accepts a signature computed as docs/webhooks.md describes', () => {
    expect(verifyWebhookSignature(SECRET, header(SECRET, T, BODY), BODY, { now: NOW })).to.deep.equal({ valid: true, timestamp: T });
    expect(verifyWebhookSignature(SECRET, header(SECRET, T, BODY), Buffer.from(BODY), { now: NOW }).valid).to.equal(true);
  });

  it('accepts what the service signs', () => {
    expect(verifyWebhookSignature(SECRET, signDelivery(SECRET, BODY, NOW), BODY, { now: NOW }).valid).to.equal(true);
  });

  it('refuses another secret, an altered body and a re-serialised body', () => {
    expect(verifyWebhookSignature('00'.repeat(32), header(SECRET, T, BODY), BODY, { now: NOW })).to.deep.equal({
      valid: false,
      reason: 'signature_mismatch',
    });
    expect(verifyWebhookSignature(SECRET, header(SECRET, T, BODY), BODY.replace('read', 'rEad'), { now: NOW }).valid).to.equal(false);
    const reserialised = JSON.stringify(JSON.parse(BODY), null, 1);
    expect(verifyWebhookSignature(SECRET, header(SECRET, T, BODY), reserialised, { now: NOW }).valid).to.equal(false);
  });

  it('refuses timestamps more than 300 s away by default, and honours toleranceS', () => {
    const signed = header(SECRET, T - 301, BODY);
    expect(verifyWebhookSignature(SECRET, signed, BODY, { now: NOW })).to.deep.equal({
      valid: false,
      reason: 'timestamp_out_of_tolerance',
    });
    expect(verifyWebhookSignature(SECRET, header(SECRET, T + 301, BODY), BODY, { now: NOW }).valid).to.equal(false);
    expect(verifyWebhookSignature(SECRET, header(SECRET, T - 300, BODY), BODY, { now: NOW }).valid).to.equal(true);
    expect(verifyWebhookSignature(SECRET, signed, BODY, { now: NOW, toleranceS: 600 }).valid).to.equal(true);
  });

  it('refuses a signature whose t was changed (the timestamp is signed)', () => {
    const original = header(SECRET, T - 1000, BODY);
    const replayed = original.replace(`t=${T - 1000}`, `t=${T}`);
    expect(verifyWebhookSignature(SECRET, replayed, BODY, { now: NOW })).to.deep.equal({ valid: false, reason: 'signature_mismatch' });
  });

  for (const bad of [
    undefined,
    '',
    'garbage',
    `t=${T}`,
    'v1=abc',
    `t=${T},v1=zz`,
    `t=abc,v1=${'0'.repeat(64)}`,
    `t=${T},t=${T},v1=${'0'.repeat(64)}`,
  ]) {
    it(`reports a malformed header: ${JSON.stringify(bad)}`, () => {
      expect(verifyWebhookSignature(SECRET, bad, BODY, { now: NOW })).to.deep.equal({ valid: false, reason: 'malformed_header' });
    });
  }

  it('accepts any of several v1 values (a sender signing with two secrets during rotation)', () => {
    const other = header('aa'.repeat(32), T, BODY).split(',')[1];
    expect(verifyWebhookSignature(SECRET, `${header(SECRET, T, BODY)},${other}`, BODY, { now: NOW }).valid).to.equal(true);
  });
});
