import { expect } from 'chai';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import { appliedMessage, policyHealth, policyStatus } from '../../src/controller/retentionPolicyStatus.ts';
import type { RetentionPolicyRecord } from '../../src/lifecycle/retentionStore.ts';

function policy(overrides: Partial<RetentionPolicyRecord> = {}): RetentionPolicyRecord {
  return {
    tenantId: 'acme',
    period: parseRetentionPeriod('6y')!,
    locked: false,
    archive: null,
    managedBy: 'kubernetes:ns/acme/uid',
    updatedAt: new Date(0),
    ...overrides,
  };
}

describe('what a RetentionPolicy resource shows', () => {
  it('tells of an applied change with the period it replaced, and of nothing unchanged', () => {
    expect(appliedMessage({ kind: 'applied', policy: policy(), previous: undefined })).to.equal('Tenant acme keeps its events 6y.');
    const previous = policy({ period: parseRetentionPeriod('1y')!, locked: true });
    expect(appliedMessage({ kind: 'applied', policy: policy({ locked: true }), previous })).to.equal(
      'Tenant acme keeps its events 6y (locked) (was 1y, locked).',
    );
    expect(appliedMessage({ kind: 'unchanged', policy: policy() })).to.equal(undefined);
  });

  it('is Ready, Applied or Locked, naming the archive bucket when expiring events are archived first', () => {
    expect(policyHealth(policy(), undefined)).to.deep.equal({
      state: 'Ready',
      reason: 'Applied',
      message: 'Tenant acme keeps its events 6y.',
    });
    const archived = policyHealth(policy({ locked: true, archive: { bucket: 'trail' } }), undefined);
    expect(archived).to.include({ state: 'Ready', reason: 'Locked' });
    expect(archived.message).to.contain('archived to s3://trail first');
  });

  it('stalls while archiving before expiry fails, saying when and why (the policy still applies)', () => {
    const health = policyHealth(policy({ archive: { bucket: 'trail' } }), {
      failedAt: new Date(Date.UTC(2030, 0, 1)),
      reason: 'AccessDenied',
    });
    expect(health).to.include({ state: 'Stalled', reason: 'ArchiveFailing' });
    expect(health.message).to.equal(
      'Tenant acme keeps its events 6y. Archiving before expiry failed at 2030-01-01T00:00:00.000Z: AccessDenied. Nothing of that range expired; the next pass tries again.',
    );
  });

  it('shows the stored policy in status, or what status showed while none is stored', () => {
    expect(policyStatus(policy({ locked: true }), { enforced: '1y', locked: false })).to.deep.equal({ enforced: '6y', locked: true });
    expect(policyStatus(undefined, { enforced: '1y', locked: true })).to.deep.equal({ enforced: '1y', locked: true });
    expect(policyStatus(undefined, undefined)).to.deep.equal({ enforced: undefined, locked: undefined });
  });
});
