import { expect } from 'chai';
import { uuidv7 } from '../../src/events/uuidv7.ts';

describe('uuidv7', () => {
  it('lays out RFC 9562 version 7: the millisecond in the first 48 bits, version 7, variant 10', () => {
    const at = Date.parse('2026-11-23T10:15:00.123Z');
    const id = uuidv7(at);
    expect(id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16)).to.equal(at);
  });

  it('orders ids made one after another, within one millisecond and across milliseconds', () => {
    const at = Date.parse('2026-11-23T10:15:00.000Z');
    const ids = [
      ...Array.from({ length: 10_000 }, () => uuidv7(at)),
      ...Array.from({ length: 1_000 }, () => uuidv7(at + 1)),
      ...Array.from({ length: 1_000 }, (_, index) => uuidv7(at + 2 + Math.floor(index / 10))),
    ];
    // Text order is byte order for lowercase hex of equal length, as Postgres' uuid order is.
    const sorted = [...ids].sort();
    expect(sorted).to.deep.equal(ids);
    expect(new Set(ids).size).to.equal(ids.length);
  });
});
