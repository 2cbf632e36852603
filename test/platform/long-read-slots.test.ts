import { expect } from 'chai';
import { TooManyLongReadsError } from '../../src/platform/errors.ts';
import { LongReadSlots, type LongReadObserver } from '../../src/platform/longReadSlots.ts';

/** What the metrics see: the active gauge's changes and the refusals, in order. */
function recorder(): LongReadObserver & { seen: string[] } {
  const seen: string[] = [];
  return { seen, active: (delta) => seen.push(`active ${delta}`), refused: (limit) => seen.push(`refused ${limit}`) };
}

function refusal(take: () => unknown): TooManyLongReadsError {
  try {
    take();
  } catch (error) {
    expect(error).to.be.instanceOf(TooManyLongReadsError);
    return error as TooManyLongReadsError;
  }
  throw new Error('admitted');
}

describe('admission of long reads (exports, live streams): caps per tenant and per instance', () => {
  it('admits a tenant’s reads up to its cap, then refuses the next with a 429 naming the tenant’s cap', () => {
    const observer = recorder();
    const slots = new LongReadSlots({ perTenant: 2, perInstance: 5 }, observer);
    slots.take('a', 'exports');
    slots.take('a', 'exports');
    const refused = refusal(() => slots.take('a', 'exports'));
    expect(refused.status).to.equal(429);
    expect(refused.code).to.equal('concurrent_exports');
    expect(refused.retryAfterSeconds).to.be.greaterThan(0);
    expect(refused.message).to.include('This tenant already has 2 exports running');
    expect(observer.seen).to.deep.equal(['active 1', 'active 1', 'refused tenant']);
  });

  it('leaves other tenants their slots while one is at its cap, up to the instance’s', () => {
    const observer = recorder();
    const slots = new LongReadSlots({ perTenant: 2, perInstance: 3 }, observer);
    slots.take('a', 'exports');
    slots.take('a', 'exports');
    slots.take('b', 'exports');
    expect(refusal(() => slots.take('c', 'exports')).message).to.include('This instance is running as many exports as it may at once (3)');
    expect(observer.seen.at(-1)).to.equal('refused instance');
    expect(slots.inProgress()).to.equal(3);
    expect(slots.inProgress('a')).to.equal(2);
  });

  it('gives a slot back once, however often it is released', () => {
    const observer = recorder();
    const slots = new LongReadSlots({ perTenant: 1, perInstance: 1 }, observer);
    const slot = slots.take('a', 'exports');
    slot.release();
    slot.release();
    expect(slots.inProgress()).to.equal(0);
    expect(slots.inProgress('a')).to.equal(0);
    slots.take('b', 'exports');
    expect(observer.seen).to.deep.equal(['active 1', 'active -1', 'active 1']);
  });

  it('refuses live streams with their own code, counted apart from exports', () => {
    const live = new LongReadSlots({ perTenant: 1, perInstance: 4 }, undefined, 'concurrent_live_streams');
    live.take('a', 'live streams');
    expect(refusal(() => live.take('a', 'live streams')).code).to.equal('concurrent_live_streams');
  });

  it('refuses limits that admit nothing, or a tenant more than the instance', () => {
    expect(() => new LongReadSlots({ perTenant: 0, perInstance: 4 })).to.throw(RangeError);
    expect(() => new LongReadSlots({ perTenant: 5, perInstance: 4 })).to.throw(RangeError);
  });
});
