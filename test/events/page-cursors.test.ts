import { expect } from 'chai';
import { CursorCodec, SignedCursor } from '../../src/events/cursor.ts';
import { ValidationError } from '../../src/platform/errors.ts';

const PEPPER = 'p'.repeat(32);
const position = { occurredAtMs: Date.UTC(2026, 11, 5, 6, 0, 0), eventId: '0195a1c2-7d00-7000-8000-000000000001' };
const filters = { action: 'phi.read', phiInvolved: true };

/** Whether decoding throws the documented 422 on `cursor`. */
function refused(decode: () => unknown): boolean {
  try {
    decode();
    return false;
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    expect((error as ValidationError).details).to.deep.equal([
      { field: 'cursor', message: 'is not a cursor issued for this query; start again without it' },
    ]);
    return true;
  }
}

describe('page cursors of the event list (docs/api.md "Paging")', () => {
  const codec = new CursorCodec(PEPPER);
  const cursor = codec.encode(position, 'tenant-a', filters);

  it('give back the position after which the next page starts', () => {
    expect(codec.decode(cursor, 'tenant-a', filters)).to.deep.equal(position);
  });

  it('are opaque: the text shows neither the tenant nor the filters', () => {
    expect(cursor).to.match(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(cursor).not.to.include('tenant-a');
    expect(Buffer.from(cursor.split('.')[0]!, 'base64url').toString()).not.to.include('phi');
  });

  it('are refused with a 422 for another tenant, under other filters, or from a service with another pepper', () => {
    expect(refused(() => codec.decode(cursor, 'tenant-b', filters))).to.equal(true);
    expect(refused(() => codec.decode(cursor, 'tenant-a', { ...filters, phiInvolved: false }))).to.equal(true);
    expect(refused(() => codec.decode(cursor, 'tenant-a', {}))).to.equal(true);
    expect(refused(() => new CursorCodec('q'.repeat(32)).decode(cursor, 'tenant-a', filters))).to.equal(true);
  });

  it('are refused when edited by hand: another position under the old MAC, a cut MAC, extra parts, garbage', () => {
    const [, mac] = cursor.split('.');
    const moved = `${Buffer.from(`1:0:${position.eventId}`).toString('base64url')}.${mac}`;
    for (const edited of [moved, cursor.slice(0, -2), `${cursor}.x`, 'not-a-cursor', '', `${cursor}${'A'.repeat(200)}`])
      expect(
        refused(() => codec.decode(edited, 'tenant-a', filters)),
        edited,
      ).to.equal(true);
  });

  it('are of their own kind: a cursor of another list, signed with the same pepper, is not a page cursor', () => {
    const other = new SignedCursor(PEPPER, 'another-list-v1').encode(`1:${position.occurredAtMs}:${position.eventId}`, 'tenant-a');
    expect(refused(() => codec.decode(other, 'tenant-a', filters))).to.equal(true);
  });
});
