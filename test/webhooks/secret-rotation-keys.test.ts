import { expect } from 'chai';
import { newEd25519Key } from '../../src/webhooks/endpointConfiguration.ts';
import { SecretBox, type SealedSecrets } from '../../src/webhooks/secretBox.ts';
import { rotatedKeys } from '../../src/webhooks/secretRotation.ts';

const box = new SecretBox('11'.repeat(32));
const NOW = Date.UTC(2026, 11, 5, 6, 0, 0);
const sealedWith = (current: string, previous?: string, ed25519 = false): SealedSecrets => ({
  current: box.seal(current),
  previous: previous === undefined ? null : { ciphertext: box.seal(previous), expiresAt: new Date(NOW + 60_000) },
  hmac: true,
  ed25519: ed25519 ? { current: newEd25519Key(box).keyCiphertext, previous: null } : null,
  headers: null,
});
const rotation = { secret: 'whsec_new', overlapS: 3_600, nowMs: NOW };

describe('a rotation of an endpoint’s signing secret (rotatedKeys)', () => {
  it('signs with the new secret, and with the replaced one beside it until the overlap ends', () => {
    const sealed = sealedWith('whsec_old');
    const { keys, olderSecretRetired } = rotatedKeys(sealed, { publicKey: null }, rotation, box);
    expect(box.open(keys.secret)).to.equal('whsec_new');
    expect(keys.previous).to.equal(sealed.current);
    expect(keys.previousExpiresAt.getTime()).to.equal(NOW + 3_600_000);
    expect(olderSecretRetired).to.equal(false);
    expect(keys.ed25519).to.equal(null);
  });

  it('retires at once a secret still overlapping from an earlier rotation: at most two are ever valid', () => {
    const sealed = sealedWith('whsec_second', 'whsec_first');
    const { keys, olderSecretRetired } = rotatedKeys(sealed, { publicKey: null }, rotation, box);
    expect(box.open(keys.previous)).to.equal('whsec_second');
    expect(olderSecretRetired).to.equal(true);
  });

  it('keeps the secret the controller’s Secret holds when it is the previous one (a rotation repeated after a crash)', () => {
    const sealed = sealedWith('whsec_never_seen', 'whsec_receivers_have');
    const { keys, olderSecretRetired } = rotatedKeys(sealed, { publicKey: null }, { ...rotation, keep: 'whsec_receivers_have' }, box);
    expect(box.open(keys.previous)).to.equal('whsec_receivers_have');
    expect(olderSecretRetired).to.equal(false);
  });

  it('keeps the current secret when the kept one is current, or not valid at all', () => {
    const sealed = sealedWith('whsec_current', 'whsec_previous');
    expect(box.open(rotatedKeys(sealed, { publicKey: null }, { ...rotation, keep: 'whsec_current' }, box).keys.previous)).to.equal(
      'whsec_current',
    );
    expect(box.open(rotatedKeys(sealed, { publicKey: null }, { ...rotation, keep: 'whsec_unknown' }, box).keys.previous)).to.equal(
      'whsec_current',
    );
  });

  it('rotates the Ed25519 key with the secret when the endpoint has one, the replaced key signing beside it', () => {
    const sealed = sealedWith('whsec_old', undefined, true);
    const publicKey = Buffer.alloc(32, 7);
    const { keys } = rotatedKeys(sealed, { publicKey }, rotation, box);
    expect(keys.ed25519!.previousKeyCiphertext).to.equal(sealed.ed25519!.current);
    expect(keys.ed25519!.previousPublicKey).to.equal(publicKey);
    expect(keys.ed25519!.publicKey).to.have.length(32);
    expect(keys.ed25519!.publicKey.equals(publicKey)).to.equal(false);
  });
});
