import { expect } from 'chai';
import { generateApiKey, hashKeySecret, parseApiKey } from '../../src/auth/apiKeyFormat.ts';

describe('API keys as clients hold them (docs/api.md "Authentication and scopes")', () => {
  it('are atr_<env>_<lookup id>_<secret>, and read back as such', () => {
    const minted = generateApiKey('live');
    expect(minted.key).to.match(/^atr_live_[0-9a-f]{8}_[0-9a-f]{32}$/);
    expect(parseApiKey(minted.key)).to.deep.equal({ environment: 'live', lookupId: minted.lookupId, secret: minted.secret });
    expect(parseApiKey(generateApiKey('test').key)?.environment).to.equal('test');
  });

  it('are drawn anew each time', () => {
    const keys = new Set(Array.from({ length: 50 }, () => generateApiKey('live').key));
    expect(keys.size).to.equal(50);
  });

  it('are not keys when anything is off: environment, lengths, case, separators, surrounding text', () => {
    const secret = 'a'.repeat(32);
    for (const text of [
      `atr_prod_0123abcd_${secret}`,
      `atr_live_0123abc_${secret}`,
      `atr_live_0123abcd_${secret}0`,
      `atr_live_0123ABCD_${secret}`,
      `atr-live-0123abcd-${secret}`,
      `Bearer atr_live_0123abcd_${secret}`,
      '',
    ])
      expect(parseApiKey(text), text).to.equal(undefined);
  });

  it('are stored as an HMAC of the secret under the pepper: the same under one pepper, another under the next', () => {
    const hash = hashKeySecret('pepper-one', 'a'.repeat(32));
    expect(hash).to.have.length(32);
    expect(hashKeySecret('pepper-one', 'a'.repeat(32)).equals(hash)).to.equal(true);
    expect(hashKeySecret('pepper-two', 'a'.repeat(32)).equals(hash)).to.equal(false);
    expect(hashKeySecret('pepper-one', 'b'.repeat(32)).equals(hash)).to.equal(false);
  });
});
