import { expect } from 'chai';
import { SecretBox, generateWebhookId, generateWebhookSecret, secretsSigningAt, type SealedSecrets } from '../../src/webhooks/secretBox.ts';
import { WEBHOOK_ID_PATTERN } from '../../src/webhooks/webhookRules.ts';

const box = new SecretBox('44'.repeat(32));

/** docs/webhooks.md: signing secrets at rest, AES-256-GCM under SECRET_ENCRYPTION_KEY. */
describe('webhook secrets at rest', () => {
  it('open to what was sealed, each seal a different ciphertext that never shows the secret', () => {
    const first = box.seal('whsec_c2VjcmV0');
    const second = box.seal('whsec_c2VjcmV0');
    expect(box.open(first)).to.equal('whsec_c2VjcmV0');
    expect(first.equals(second)).to.equal(false);
    expect(first.includes(Buffer.from('c2VjcmV0'))).to.equal(false);
    expect(first[0]).to.equal(1);
  });

  it('do not open under another key, nor once altered', () => {
    const sealed = box.seal('s3cret');
    expect(() => new SecretBox('55'.repeat(32)).open(sealed)).to.throw();
    const altered = Buffer.from(sealed);
    altered[altered.length - 1]! ^= 1;
    expect(() => box.open(altered)).to.throw();
    const otherVersion = Buffer.from(sealed);
    otherVersion[0] = 2;
    expect(() => box.open(otherVersion)).to.throw('unknown secret format 2');
  });

  it('need a 256-bit key', () => {
    expect(() => new SecretBox('44'.repeat(16))).to.throw('SecretBox needs a 256-bit key');
  });

  it('are drawn anew for each endpoint: 32 random bytes of secret, a wh_ id', () => {
    expect(generateWebhookSecret()).to.match(/^[0-9a-f]{64}$/);
    expect(generateWebhookSecret()).not.to.equal(generateWebhookSecret());
    expect(generateWebhookId()).to.match(WEBHOOK_ID_PATTERN);
  });
});

describe('the keys that sign at a given moment (secretsSigningAt)', () => {
  const NOW = Date.UTC(2026, 11, 5, 6, 0, 0);
  const sealed = (changes: Partial<SealedSecrets> = {}): SealedSecrets => ({
    current: Buffer.from('current'),
    previous: { ciphertext: Buffer.from('previous'), expiresAt: new Date(NOW + 1_000) },
    hmac: true,
    ed25519: { current: Buffer.from('ed-current'), previous: Buffer.from('ed-previous') },
    headers: null,
    ...changes,
  });
  const text = (keys: Buffer[]) => keys.map(String);

  it('signs with the current and the replaced key, newest first, until the overlap ends', () => {
    expect(text(secretsSigningAt(sealed(), NOW).hmac)).to.deep.equal(['current', 'previous']);
    expect(text(secretsSigningAt(sealed(), NOW).ed25519)).to.deep.equal(['ed-current', 'ed-previous']);
  });

  it('never signs with the replaced key at or after its expiry', () => {
    expect(text(secretsSigningAt(sealed(), NOW + 1_000).hmac)).to.deep.equal(['current']);
    expect(text(secretsSigningAt(sealed(), NOW + 1_000).ed25519)).to.deep.equal(['ed-current']);
  });

  it('signs only with the schemes the endpoint chose', () => {
    expect(secretsSigningAt(sealed({ hmac: false }), NOW).hmac).to.deep.equal([]);
    expect(secretsSigningAt(sealed({ ed25519: null }), NOW).ed25519).to.deep.equal([]);
  });
});
