import { expect } from 'chai';
import { declaredHold, holding } from '../../src/controller/legalHoldStatus.ts';
import type { LegalHoldSpec } from '../../src/controller/lifecycleKinds.ts';
import type { LegalHoldRecord } from '../../src/lifecycle/legalHoldStore.ts';

const SPEC = { tenantId: 'acme', reason: 'litigation', reference: 'CASE-42' } as LegalHoldSpec;

describe('what a LegalHold resource asks for and shows', () => {
  it('declares open bounds and every action when the spec leaves them out', () => {
    expect(declaredHold(SPEC)).to.deep.equal({
      tenantId: 'acme',
      since: null,
      until: null,
      actionPrefixes: [],
      reason: 'litigation',
      reference: 'CASE-42',
    });
  });

  it('declares the bounds and prefixes the spec gives, as instants', () => {
    const spec = { ...SPEC, since: '2024-01-01T00:00:00Z', until: '2024-07-01T00:00:00Z', actionPrefixes: ['billing.'] } as LegalHoldSpec;
    expect(declaredHold(spec)).to.deep.include({
      since: new Date(Date.UTC(2024, 0, 1)),
      until: new Date(Date.UTC(2024, 6, 1)),
      actionPrefixes: ['billing.'],
    });
  });

  it('shows a hold in place as Ready, Holding, with its id and when it was placed', () => {
    const hold = { id: 'hold_1', tenantId: 'acme', placedAt: new Date(Date.UTC(2030, 0, 1)) } as LegalHoldRecord;
    expect(holding(hold)).to.deep.equal({
      status: { holdId: 'hold_1', placedAt: '2030-01-01T00:00:00.000Z' },
      health: {
        state: 'Ready',
        reason: 'Holding',
        message: 'Legal hold hold_1 keeps the matching events of tenant acme, whatever the retention policy.',
      },
    });
  });
});
