import { expect } from 'chai';
import type { ApiKeyRecord } from '../../src/auth/apiKeyStore.ts';
import { decideApiKey, delivers, settleApiKey, type ApiKeyFacts } from '../../src/controller/apiKeyDecision.ts';
import type { SecretState } from '../../src/controller/kubeResources.ts';
import type { ApiKeySpec } from '../../src/controller/resources.ts';

const SPEC: ApiKeySpec = { tenantId: 'acme', scopes: ['audit:read', 'audit:export'], secretName: 'acme-key' };

function key(overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return {
    lookupId: 'k1',
    environment: 'live',
    secretHash: Buffer.alloc(32),
    tenantId: 'acme',
    scopes: ['audit:export', 'audit:read'],
    allowedCidrs: [],
    description: '',
    managedBy: 'kubernetes:ns/acme/uid',
    createdAt: new Date(0),
    revokedAt: null,
    ...overrides,
  };
}

const holding = (lookupId: string): SecretState => ({ state: 'owned', values: { apiKey: 'secret', lookupId } });

function facts(overrides: Partial<ApiKeyFacts> = {}): ApiKeyFacts {
  return { spec: SPEC, record: key(), rotation: undefined, secret: holding('k1'), statusLookupId: 'k1', ...overrides };
}

describe('what a reconcile of an ApiKey does, decided', () => {
  it('revokes an active key on spec.revoked, whatever became of its Secret', () => {
    const spec = { ...SPEC, revoked: true };
    expect(decideApiKey(facts({ spec, secret: { state: 'foreign' } }))).to.deep.equal({ kind: 'revoked', revokeFirst: true });
    expect(decideApiKey(facts({ spec, secret: undefined }))).to.deep.equal({ kind: 'revoked', revokeFirst: true });
  });

  it('revokes nothing more for a key already revoked, or never minted', () => {
    const spec = { ...SPEC, revoked: true };
    expect(decideApiKey(facts({ spec, record: key({ revokedAt: new Date(1) }) }))).to.deep.equal({ kind: 'revoked', revokeFirst: false });
    expect(decideApiKey(facts({ spec, record: undefined }))).to.deep.equal({ kind: 'revoked', revokeFirst: false });
  });

  it("touches nothing while the Secret's name is someone else's, not even to mint or rotate", () => {
    expect(decideApiKey(facts({ secret: { state: 'foreign' } }))).to.deep.equal({ kind: 'secret-conflict' });
    expect(decideApiKey(facts({ secret: { state: 'foreign' }, record: undefined }))).to.deep.equal({ kind: 'secret-conflict' });
    expect(decideApiKey(facts({ secret: { state: 'foreign' }, rotation: 'r2' }))).to.deep.equal({ kind: 'secret-conflict' });
  });

  it('mints the first key, whatever the annotation says', () => {
    expect(decideApiKey(facts({ record: undefined, secret: { state: 'missing' }, rotation: 'r1' }))).to.deep.equal({ kind: 'mint' });
  });

  it('rotates when the annotation asks, naming the request handled, even for a revoked or undelivered key', () => {
    const record = key({ revokedAt: new Date(1) });
    expect(decideApiKey(facts({ record, rotation: 'r2' }))).to.deep.equal({ kind: 'rotate', record, request: 'r2' });
    const delivered = key();
    expect(decideApiKey(facts({ record: delivered, rotation: 'r3', secret: { state: 'missing' } }))).to.deep.equal({
      kind: 'rotate',
      record: delivered,
      request: 'r3',
    });
  });

  it('rotates, unasked, a key that neither the Secret nor status ever showed (a crash before delivery)', () => {
    const record = key();
    expect(decideApiKey(facts({ record, secret: { state: 'missing' }, statusLookupId: undefined }))).to.deep.equal({
      kind: 'rotate',
      record,
      request: undefined,
    });
  });

  it('keeps a delivered key whose Secret was deleted, and says how to get a new one', () => {
    const step = decideApiKey(facts({ secret: { state: 'missing' } }));
    expect(step.kind).to.equal('secret-missing');
    if (step.kind !== 'secret-missing') return;
    expect(step.health).to.include({ state: 'Stalled', reason: 'SecretMissing' });
    expect(step.health.message).to.match(/^Secret acme-key was deleted; the key still works\. .*audittrail\.dev\/rotate/);
  });

  it('keeps a delivered key whose Secret now holds another key, and says so', () => {
    const step = decideApiKey(facts({ secret: holding('k0') }));
    expect(step.kind === 'secret-missing' && step.health.message).to.match(/^Secret acme-key no longer holds key k1;/);
  });

  it('settles a key its Secret holds, and a revoked one without looking at the Secret', () => {
    const record = key();
    expect(decideApiKey(facts({ record }))).to.deep.equal({ kind: 'settle', record });
    const revoked = key({ revokedAt: new Date(1) });
    expect(decideApiKey(facts({ record: revoked, secret: { state: 'missing' } }))).to.deep.equal({ kind: 'settle', record: revoked });
  });
});

describe('a settled ApiKey, decided', () => {
  it('reports a key revoked outside Kubernetes, with the two ways out', () => {
    const settled = settleApiKey(key({ revokedAt: new Date(1) }), SPEC);
    expect(settled.kind).to.equal('revoked-outside');
    if (settled.kind !== 'revoked-outside') return;
    expect(settled.health).to.include({ state: 'Stalled', reason: 'RevokedOutsideKubernetes' });
    expect(settled.health.message).to.contain('spec.revoked: true').and.to.contain('audittrail.dev/rotate');
  });

  it('leaves grants that match as stored: scopes and CIDRs in any order, bare addresses as /32', () => {
    const record = key({ allowedCidrs: ['10.0.0.0/8', '192.0.2.7/32'] });
    expect(settleApiKey(record, { ...SPEC, allowedCidrs: ['192.0.2.7', '10.0.0.0/8'] })).to.deep.equal({ kind: 'active' });
  });

  it('updates grants when the scopes, the allow-list or the description changed', () => {
    expect(settleApiKey(key(), { ...SPEC, scopes: ['audit:read'] })).to.deep.equal({ kind: 'update-grants' });
    expect(settleApiKey(key(), { ...SPEC, allowedCidrs: ['10.0.0.0/8'] })).to.deep.equal({ kind: 'update-grants' });
    expect(settleApiKey(key(), { ...SPEC, description: 'ci' })).to.deep.equal({ kind: 'update-grants' });
  });

  it('passes a CIDR it cannot read on as written, for updateGrants to refuse by name', () => {
    expect(settleApiKey(key({ allowedCidrs: ['not-a-cidr'] }), { ...SPEC, allowedCidrs: ['not-a-cidr'] })).to.deep.equal({
      kind: 'active',
    });
  });
});

describe('whether a Secret delivers a key', () => {
  it('is true only for our own Secret holding that very key', () => {
    expect(delivers(holding('k1'), key())).to.equal(true);
    expect(delivers(holding('k2'), key())).to.equal(false);
    expect(delivers({ state: 'foreign' }, key())).to.equal(false);
    expect(delivers({ state: 'missing' }, key())).to.equal(false);
    expect(delivers(undefined, key())).to.equal(false);
  });
});
