import { expect } from 'chai';
import { parseRetentionPeriod, type RetentionPeriod } from '../../src/config/valueFormats.ts';
import { decideDeclaration, decideRelease, type DeclaredPolicy } from '../../src/lifecycle/retentionRules.ts';
import type { RetentionPolicyRecord } from '../../src/lifecycle/retentionStore.ts';

const MINE = 'kubernetes:ns/acme-retention/uid';
const period = (text: string): RetentionPeriod => parseRetentionPeriod(text)!;

function stored(overrides: Partial<RetentionPolicyRecord> = {}): RetentionPolicyRecord {
  return { tenantId: 'acme', period: period('6y'), locked: false, archive: null, managedBy: MINE, updatedAt: new Date(0), ...overrides };
}

function declared(overrides: Partial<DeclaredPolicy> = {}): DeclaredPolicy {
  return { tenantId: 'acme', period: period('6y'), locked: false, archive: null, ...overrides };
}

describe("a RetentionPolicy's declaration, decided", () => {
  it('applies the first policy of a tenant', () => {
    expect(decideDeclaration(declared(), MINE, undefined)).to.deep.equal({ kind: 'apply' });
  });

  it("refuses a second policy for a tenant that has another resource's", () => {
    const decision = decideDeclaration(declared(), MINE, stored({ managedBy: 'kubernetes:ns/other/uid2' }));
    expect(decision).to.include({ kind: 'refused', reason: 'TenantHasPolicy' });
    expect(decision.kind === 'refused' && decision.message).to.contain('kubernetes:ns/other/uid2');
  });

  it('refuses to move a policy to another tenant', () => {
    expect(decideDeclaration(declared({ tenantId: 'globex' }), MINE, stored())).to.include({ kind: 'refused', reason: 'TenantChanged' });
  });

  it('changes an unlocked policy freely: shorter, locked, archived', () => {
    expect(decideDeclaration(declared({ period: period('30d') }), MINE, stored())).to.deep.equal({ kind: 'apply' });
    expect(decideDeclaration(declared({ locked: true }), MINE, stored())).to.deep.equal({ kind: 'apply' });
    expect(decideDeclaration(declared({ archive: { bucket: 'b' } }), MINE, stored())).to.deep.equal({ kind: 'apply' });
  });

  it('refuses to unlock a locked policy, or to shorten it, saying what goes on applying', () => {
    const locked = stored({ locked: true, period: period('1y') });
    const unlocked = decideDeclaration(declared({ period: period('1y') }), MINE, locked);
    expect(unlocked).to.include({ kind: 'refused', reason: 'LockedPolicyUnlocked' });
    const shorter = decideDeclaration(declared({ period: period('365d'), locked: true }), MINE, locked);
    expect(shorter).to.include({ kind: 'refused', reason: 'LockedPolicyShortened' });
    expect(shorter.kind === 'refused' && shorter.message)
      .to.contain('365d would shorten it')
      .and.to.contain('1y goes on applying');
  });

  it('lengthens a locked policy, and takes 12mo for 1y', () => {
    const locked = stored({ locked: true, period: period('1y') });
    expect(decideDeclaration(declared({ period: period('2y'), locked: true }), MINE, locked)).to.deep.equal({ kind: 'apply' });
    expect(decideDeclaration(declared({ period: period('12mo'), locked: true }), MINE, locked)).to.deep.equal({ kind: 'apply' });
  });

  it('leaves a policy unchanged when the declaration says what is stored, archive keys in any order', () => {
    const current = stored({ archive: { bucket: 'b', prefix: 'p' } });
    expect(decideDeclaration(declared({ archive: { prefix: 'p', bucket: 'b' } }), MINE, current)).to.deep.equal({
      kind: 'unchanged',
      policy: current,
    });
  });
});

describe("a RetentionPolicy's deletion, decided", () => {
  it('has nothing to remove when no policy is stored', () => {
    expect(decideRelease(undefined)).to.deep.equal({ kind: 'absent' });
  });

  it('removes an unlocked policy', () => {
    const current = stored();
    expect(decideRelease(current)).to.deep.equal({ kind: 'remove', policy: current });
  });

  it('refuses to remove a locked policy, which goes on applying', () => {
    const current = stored({ locked: true });
    const decision = decideRelease(current);
    expect(decision).to.include({ kind: 'refused', reason: 'LockedPolicyRemoved', enforced: current });
    expect(decision.kind === 'refused' && decision.message).to.equal(
      'The retention policy of tenant acme is locked at 6y: it cannot be removed, and goes on applying.',
    );
  });
});
