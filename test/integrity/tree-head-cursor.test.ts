import { expect } from 'chai';
import { CursorCodec } from '../../src/events/cursor.ts';
import { canonicalFilters } from '../../src/events/eventFilters.ts';
import { ValidationError } from '../../src/platform/errors.ts';
import { TreeHeadCursor } from '../../src/integrity/treeHeadCursor.ts';

const PEPPER = 'p'.repeat(32);
const WINDOW = 'since=2026-12-01T00:00:00.000Z';

/** The 422 that decoding `cursor` throws, as the API words it. */
function refusalOf(decode: () => unknown): unknown {
  try {
    decode();
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return (error as ValidationError).details;
  }
  throw new Error('the cursor was accepted');
}

const REFUSAL = [{ field: 'cursor', message: 'is not a cursor issued for this query; start again without it' }];

// The tree-head history pages with cursors of its own: bound to the tenant and the window, refused otherwise.
describe('tree-head history cursors', () => {
  const cursors = new TreeHeadCursor(PEPPER);

  it('gives back the signed_at it carries, for the same tenant and window', () => {
    const cursor = cursors.encode(1_796_000_000_123, 'acme', WINDOW);
    expect(cursors.decode(cursor, 'acme', WINDOW)).to.equal(1_796_000_000_123);
  });

  it('is refused for another tenant, another window, or under another pepper', () => {
    const cursor = cursors.encode(1_796_000_000_123, 'acme', WINDOW);
    expect(refusalOf(() => cursors.decode(cursor, 'globex', WINDOW))).to.deep.equal(REFUSAL);
    expect(refusalOf(() => cursors.decode(cursor, 'acme', 'since=2026-11-01T00:00:00.000Z'))).to.deep.equal(REFUSAL);
    expect(refusalOf(() => new TreeHeadCursor('q'.repeat(32)).decode(cursor, 'acme', WINDOW))).to.deep.equal(REFUSAL);
  });

  it('is refused when edited: another time in its text, a cut MAC, an extra part', () => {
    const cursor = cursors.encode(1_796_000_000_123, 'acme', WINDOW);
    const [, mac] = cursor.split('.');
    const edited = `${Buffer.from('1:1796000000999').toString('base64url')}.${mac}`;
    for (const bad of [edited, cursor.slice(0, -2), `${cursor}.x`, '', 'x'.repeat(300)])
      expect(
        refusalOf(() => cursors.decode(bad, 'acme', WINDOW)),
        bad,
      ).to.deep.equal(REFUSAL);
  });

  it('is not an event-list cursor, nor is an event-list cursor one of its', () => {
    const list = new CursorCodec(PEPPER);
    const listCursor = list.encode({ occurredAtMs: 1_796_000_000_123, eventId: '0190c2a4-7a1e-7c3b-9a4e-1d2c3b4a5f60' }, 'acme', {});
    // The same binding text as the list's, so that only the key of each kind tells them apart.
    const sameBinding = canonicalFilters({});
    expect(refusalOf(() => cursors.decode(listCursor, 'acme', sameBinding))).to.deep.equal(REFUSAL);
    const headCursor = cursors.encode(1_796_000_000_123, 'acme', sameBinding);
    expect(() => list.decode(headCursor, 'acme', {})).to.throw(ValidationError);
  });
});
