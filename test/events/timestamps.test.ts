import { expect } from 'chai';
import { parseTimestampCeilMs } from '../../src/events/eventFields.ts';

describe('timestamp parsing', () => {
  it('reads the canonical form exactly as Date.parse does, across four centuries of random instants', () => {
    const start = Date.UTC(1900, 0, 1);
    const span = Date.UTC(2300, 0, 1) - start;
    for (let index = 0; index < 20_000; index += 1) {
      const text = new Date(start + Math.floor(Math.random() * span)).toISOString();
      expect(parseTimestampCeilMs(text), text).to.equal(Date.parse(text));
    }
  });

  for (const text of ['2024-02-29T12:00:00.000Z', '2000-02-29T00:00:00.000Z', '2026-12-31T23:59:59.999Z', '0050-06-01T00:00:00.000Z']) {
    it(`accepts ${text}`, () => {
      expect(parseTimestampCeilMs(text)).to.equal(new Date(text).getTime());
    });
  }

  for (const text of [
    '2026-02-29T12:00:00.000Z',
    '2100-02-29T12:00:00.000Z',
    '2026-04-31T12:00:00.000Z',
    '2026-13-01T12:00:00.000Z',
    '2026-00-01T12:00:00.000Z',
    '2026-01-00T12:00:00.000Z',
    '2026-01-01T24:00:00.000Z',
    '2026-01-01T12:60:00.000Z',
    '2026-01-01T12:00:60.000Z',
    '2026-01-01T1a:00:00.000Z',
    '2026-01-01T12:00:00.0a0Z',
    '2026-01-01 12:00:00.000Z',
    '2026-01-01T12:00:00.000X',
    '+26-01-01T12:00:00.000Z',
  ]) {
    it(`refuses ${text}`, () => {
      expect(parseTimestampCeilMs(text)).to.equal(undefined);
    });
  }

  it('reads offsets and lowercase separators, and rounds a sub-millisecond fraction up', () => {
    expect(parseTimestampCeilMs('2026-01-01T12:00:00+02:00')).to.equal(Date.UTC(2026, 0, 1, 10));
    expect(parseTimestampCeilMs('2026-01-01t12:00:00.5z')).to.equal(Date.UTC(2026, 0, 1, 12, 0, 0, 500));
    expect(parseTimestampCeilMs('2026-01-01T12:00:00.000001Z')).to.equal(Date.UTC(2026, 0, 1, 12, 0, 0, 1));
  });
});
