import { expect } from 'chai';
import { parseRetentionPeriod } from '../../src/config/valueFormats.ts';
import {
  NOTHING_EXPIRED,
  addRange,
  archiveOutcomeOf,
  expiresAnything,
  expiryDetails,
  removedPerMonth,
  tenantPlan,
  type TenantExpiry,
} from '../../src/lifecycle/expiryPass.ts';
import type { EffectiveRetention } from '../../src/lifecycle/retentionPolicies.ts';

const JAN = new Date(Date.UTC(2024, 0, 1));
const FEB = new Date(Date.UTC(2024, 1, 1));
const KEPT_SINCE = new Date(Date.UTC(2024, 2, 1));

function retention(overrides: Partial<EffectiveRetention> = {}): EffectiveRetention {
  return {
    tenantId: 'acme',
    source: 'policy',
    period: parseRetentionPeriod('1y'),
    locked: false,
    archive: null,
    keptSince: KEPT_SINCE,
    updatedAt: undefined,
    ...overrides,
  };
}

function plan(overrides: Partial<TenantExpiry> = {}): TenantExpiry {
  return {
    tenantId: 'acme',
    retain: '1y',
    source: 'policy',
    keptSince: KEPT_SINCE,
    months: [
      { month: JAN, expiring: 10, held: 2 },
      { month: FEB, expiring: 0, held: 1 },
    ],
    ...overrides,
  };
}

describe("a tenant's expiry plan, decided", () => {
  it('skips a tenant kept forever, counting nothing', () => {
    const kept = retention({ source: 'none', period: undefined, keptSince: undefined });
    expect(tenantPlan('acme', kept, [])).to.deep.equal({
      tenantId: 'acme',
      retain: null,
      source: 'none',
      keptSince: null,
      skipped: 'kept_forever',
      months: [],
    });
  });

  it("carries the period in force, where it comes from, and the policy's archive target", () => {
    const months = plan().months;
    expect(tenantPlan('acme', retention({ source: 'default' }), months)).to.deep.equal(plan({ source: 'default' }));
    const archived = tenantPlan('acme', retention({ archive: { bucket: 'trail', prefix: 'p' } }), months);
    expect(archived.archive).to.deep.equal({ bucket: 'trail', prefix: 'p' });
  });

  it('expires only a plan with events past a period in force and held by nothing', () => {
    expect(expiresAnything(plan())).to.equal(true);
    expect(expiresAnything(plan({ months: [{ month: JAN, expiring: 0, held: 5 }] }))).to.equal(false);
    expect(expiresAnything(plan({ skipped: 'kept_forever' }))).to.equal(false);
    expect(expiresAnything(plan({ keptSince: null }))).to.equal(false);
    expect(expiresAnything(plan({ retain: null }))).to.equal(false);
    expect(expiresAnything(plan({ source: 'none' }))).to.equal(false);
  });
});

describe('an expiry pass, added up', () => {
  it('adds ranges removed one after the other: counts summed, first of the first, last of the last', () => {
    const first = { count: 3, first: new Date(1), last: new Date(3) };
    const second = { count: 2, first: new Date(4), last: new Date(5) };
    expect(addRange(addRange(NOTHING_EXPIRED, first), second)).to.deep.equal({ count: 5, first: new Date(1), last: new Date(5) });
    expect(addRange(first, NOTHING_EXPIRED)).to.deep.equal(first);
  });

  it('records an archive failure, clears it after archiving, and leaves it alone when nothing was archived', () => {
    expect(archiveOutcomeOf(plan({ archiveFailure: 'bucket refused', archives: [] }))).to.equal('bucket refused');
    const written = { bucket: 'trail', key: 'p/acme/1', count: 10 } as NonNullable<TenantExpiry['archives']>[number];
    expect(archiveOutcomeOf(plan({ archives: [written] }))).to.equal(null);
    expect(archiveOutcomeOf(plan({ archives: [] }))).to.equal(undefined);
    expect(archiveOutcomeOf(plan())).to.equal(undefined);
  });

  it('sums the months removed from over the tenants that removed anything, in first-seen order', () => {
    const removedJan = plan({ expired: { count: 10, first: JAN, last: JAN } });
    const removedBoth = plan({
      tenantId: 'globex',
      months: [
        { month: FEB, expiring: 4, held: 0 },
        { month: JAN, expiring: 1, held: 0 },
      ],
      expired: { count: 5, first: JAN, last: FEB },
    });
    const removedNothing = plan({ tenantId: 'initech', expired: NOTHING_EXPIRED });
    expect(removedPerMonth([removedJan, removedBoth, removedNothing, plan({ tenantId: 'skipped' })])).to.deep.equal([
      { month: JAN, count: 11 },
      { month: FEB, count: 4 },
    ]);
  });

  it("records the period, its source, the range, the count and what holds kept in the tenant's trail", () => {
    const result = plan({ expired: { count: 10, first: JAN, last: FEB } });
    expect(expiryDetails(result)).to.deep.equal({
      retain: '1y',
      source: 'policy',
      kept_since: '2024-03-01T00:00:00.000Z',
      count: 10,
      first: '2024-01-01T00:00:00.000Z',
      last: '2024-02-01T00:00:00.000Z',
      held: 3,
    });
  });

  it('names the archives written, and the failure, for a policy that archives', () => {
    const written = { bucket: 'trail', key: 'p/acme/1', count: 10, sha256: 'x' } as unknown as NonNullable<
      TenantExpiry['archives']
    >[number];
    const result = plan({
      archive: { bucket: 'trail' } as TenantExpiry['archive'],
      archives: [written],
      archiveFailure: 'read back differs',
      expired: NOTHING_EXPIRED,
    });
    expect(expiryDetails(result)).to.deep.include({
      count: 0,
      first: null,
      archives: [{ bucket: 'trail', key: 'p/acme/1', count: 10 }],
      archive_failure: 'read back differs',
    });
  });
});
