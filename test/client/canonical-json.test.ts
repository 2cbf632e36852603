import { expect } from 'chai';
import { canonicalJson, canonicalObject } from '../../src/client/canonicalJson.ts';

// RFC 8785 (JCS): what the trail's leaves and signed heads hash, so a verifier elsewhere must get the same bytes.
describe('canonical JSON (RFC 8785)', () => {
  it('sorts members by their names’ UTF-16 code units, as RFC 8785 §3.2.3’s example does', () => {
    // The example of §3.2.3: "\r", "1", "\u0080", "\u00f6", "\u20ac", "\ud83d\ude00", "\ufb33" in that order.
    const record = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    const text = canonicalJson(record);
    const expectedOrder = ['\r', '1', '\u0080', '\u00f6', '\u20ac', '\ud83d\ude00', '\ufb33'];
    const positions = expectedOrder.map((name) => text.indexOf(`${JSON.stringify(name)}:`));
    expect(positions.every((position) => position > 0)).to.equal(true);
    expect([...positions].sort((a, b) => a - b)).to.deep.equal(positions);
    expect(text.startsWith('{"\\r":"Carriage Return","1":"One",')).to.equal(true);
  });

  it('writes no whitespace and sorts nested objects, keeping array order', () => {
    expect(canonicalJson({ b: [3, { z: 1, a: 2 }, 'x'], a: { d: true, c: null } })).to.equal(
      '{"a":{"c":null,"d":true},"b":[3,{"a":2,"z":1},"x"]}',
    );
  });

  it('writes numbers as ECMAScript does (RFC 8785 §3.2.2.3): -0 as 0, exponents past 1e21, no trailing zeros', () => {
    expect([0, -0, 1.5, 100, 1e21, 1e-7, Number('333333333.33333329'), -1.0].map(canonicalJson)).to.deep.equal([
      '0',
      '0',
      '1.5',
      '100',
      '1e+21',
      '1e-7',
      '333333333.3333333',
      '-1',
    ]);
  });

  it('escapes only the quote, the backslash and the C0 controls, and keeps other characters as they are', () => {
    expect(canonicalJson('a"b\\c\n\u0001é€😀')).to.equal('"a\\"b\\\\c\\n\\u0001é€😀"');
  });

  it('refuses what is not I-JSON: an unpaired surrogate, a non-finite number, a value JSON cannot hold', () => {
    expect(() => canonicalJson({ text: '\ud800' })).to.throw(TypeError, /unpaired surrogate/);
    expect(() => canonicalJson([Number.NaN])).to.throw(TypeError, /finite/);
    expect(() => canonicalJson(Number.POSITIVE_INFINITY)).to.throw(TypeError, /finite/);
    expect(() => canonicalJson(10n)).to.throw(TypeError, /bigint/);
  });

  it('leaves out undefined members, and the members canonicalObject is told to omit', () => {
    expect(canonicalJson({ b: undefined, a: 1 })).to.equal('{"a":1}');
    expect(canonicalObject({ c: 3, b: 2, a: 1 }, new Set(['b']))).to.equal('{"a":1,"c":3}');
  });

  it('sorts objects of another shape afresh after one of the same names in another order', () => {
    // The sorted names of the last shape are reused: a different shape must not get them.
    expect(canonicalJson({ y: 1, x: 2 })).to.equal('{"x":2,"y":1}');
    expect(canonicalJson({ x: 2, y: 1 })).to.equal('{"x":2,"y":1}');
    expect(canonicalJson({ y: 1, w: 2 })).to.equal('{"w":2,"y":1}');
  });
});
