import { expect } from 'chai';
import { laneLimitsOf, routeDelivery, type RoutedDelivery } from '../../src/delivery/deliveryRouting.ts';

/** The row of a delivery published for its second attempt (one made) to an active endpoint. */
const row = (changes: Partial<RoutedDelivery> = {}): RoutedDelivery => ({
  state: 'pending',
  published: true,
  attempts: 1,
  endpoint: { active: true },
  ...changes,
});
const ours = { attempt: 2, provablyOurs: true };
const unsigned = { attempt: 2, provablyOurs: false };

describe('what a delivery worker does with a message it loaded (routeDelivery)', () => {
  it('sends a pending, published delivery whose attempt is the next one to its endpoint’s lane', () => {
    expect(routeDelivery(ours, row(), false)).to.deep.equal({ kind: 'admit', work: row() });
  });

  it('leaves a message whose delivery is not in our database to another deployment, unless it names us', () => {
    expect(routeDelivery(unsigned, undefined, false).kind).to.equal('stray');
    // Ours and gone: deleted with its endpoint; nothing to do, and nothing to leave to anyone.
    expect(routeDelivery(ours, undefined, false).kind).to.equal('settle');
  });

  it('does nothing for a delivery already finished, not published, or whose attempt was already made', () => {
    expect(routeDelivery(ours, row({ state: 'succeeded' }), false).kind).to.equal('settle');
    expect(routeDelivery(ours, row({ published: false }), false).kind).to.equal('settle');
    expect(routeDelivery(ours, row({ attempts: 2 }), false).kind).to.equal('settle');
    expect(routeDelivery(ours, row({ attempts: 0 }), false).kind).to.equal('settle');
  });

  it('cancels a delivery of a disabled endpoint, without a request, even while stopping', () => {
    expect(routeDelivery(ours, row({ endpoint: { active: false } }), false).kind).to.equal('cancel');
    expect(routeDelivery(ours, row({ endpoint: { active: false } }), true).kind).to.equal('cancel');
  });

  it('puts a delivery back with a due time while the worker stops, rather than parking it', () => {
    expect(routeDelivery(unsigned, row(), true)).to.deep.equal({ kind: 'defer', work: row() });
  });
});

describe('an endpoint’s own limits on its lane (laneLimitsOf)', () => {
  it('gives most endpoints none', () => {
    expect(laneLimitsOf({ ordered: false, rateLimitPerS: null })).to.equal(undefined);
  });

  it('lets an ordered endpoint have one request at a time', () => {
    expect(laneLimitsOf({ ordered: true, rateLimitPerS: null })).to.deep.equal({ concurrency: 1, ratePerS: undefined });
  });

  it('carries an endpoint’s rate limit, its concurrency unbounded by the endpoint', () => {
    expect(laneLimitsOf({ ordered: false, rateLimitPerS: 5 })).to.deep.equal({ concurrency: Number.POSITIVE_INFINITY, ratePerS: 5 });
    expect(laneLimitsOf({ ordered: true, rateLimitPerS: 5 })).to.deep.equal({ concurrency: 1, ratePerS: 5 });
  });
});
