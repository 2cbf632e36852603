import { expect } from 'chai';
import { InvalidJsonError, ValidationError } from '../../src/platform/errors.ts';
import { firstInvalidByte, parseUtf8Json } from '../../src/platform/utf8Json.ts';

/** JSON text with raw bytes where `@@` stands. */
const withBytes = (json: string, bytes: number[]) => {
  const at = json.indexOf('@@');
  return Buffer.concat([Buffer.from(json.slice(0, at)), Buffer.from(bytes), Buffer.from(json.slice(at + 2))]);
};

/** The 422 a parse refuses with: its one field and message. */
function refusal(bytes: Uint8Array, prefix?: string): { field: string; message: string } {
  try {
    parseUtf8Json(bytes, prefix);
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    const [problem, ...more] = (error as ValidationError).details;
    expect(more).to.deep.equal([]);
    return { field: problem!.field, message: problem!.message };
  }
  throw new Error('parsed');
}

describe('firstInvalidByte (RFC 3629 well-formed UTF-8)', () => {
  const cases: Array<[string, number[], number]> = [
    ['ASCII', [0x61, 0x62], 2],
    ['a 2-, 3- and 4-byte character', [0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80], 9],
    ['U+FFFD sent as such', [0xef, 0xbf, 0xbd], 3],
    ['0xFF', [0x61, 0xff], 1],
    ['a lone continuation byte', [0x80], 0],
    ['an overlong "/" (C0 AF)', [0xc0, 0xaf], 0],
    ['an overlong 3-byte form (E0 80 AF)', [0xe0, 0x80, 0xaf], 0],
    ['a UTF-16 surrogate (ED A0 80)', [0x61, 0xed, 0xa0, 0x80], 1],
    ['above U+10FFFF (F4 90 80 80)', [0xf4, 0x90, 0x80, 0x80], 0],
    ['a truncated sequence at the end', [0x61, 0xe2, 0x82], 1],
  ];
  for (const [what, bytes, expected] of cases) {
    it(`finds ${expected === bytes.length ? 'nothing wrong' : `the first bad byte at ${expected}`} in ${what}`, () => {
      expect(firstInvalidByte(Uint8Array.from(bytes))).to.equal(expected);
      // Agrees with the platform's own validator.
      expect(expected === bytes.length).to.equal(isValid(bytes));
    });
  }
  function isValid(bytes: number[]): boolean {
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes));
      return true;
    } catch {
      return false;
    }
  }
});

describe('parseUtf8Json: JSON bytes decoded only when they are UTF-8', () => {
  it('parses valid UTF-8 JSON, multi-byte characters included', () => {
    expect(parseUtf8Json(Buffer.from('{"user_id":"zoë","n":[1,"€"]}'))).to.deep.equal({ user_id: 'zoë', n: [1, '€'] });
  });

  it('refuses invalid bytes in a value with a 422 naming the field, the byte and its offset', () => {
    const bytes = withBytes('{"events":[{"user_id":"ok"},{"user_id":"x@@"}]}', [0xff, 0xfe]);
    expect(refusal(bytes)).to.deep.equal({
      field: 'events.1.user_id',
      message: `must be valid UTF-8 text (byte 0xFF at offset ${bytes.indexOf(0xff)} is not)`,
    });
  });

  it('names the object whose key holds the invalid bytes', () => {
    const bytes = withBytes('{"details":{"k@@":"v"}}', [0xc0, 0xaf]);
    expect(refusal(bytes)).to.deep.equal({
      field: 'details',
      message: `has a key that is not valid UTF-8 text (byte 0xC0 at offset ${bytes.indexOf(0xc0)})`,
    });
  });

  it('puts the caller’s prefix before the field (a line of an import file), and names the body when nothing else holds them', () => {
    expect(refusal(withBytes('{"action":"@@"}', [0x80]), 'line 3').field).to.equal('line 3.action');
    expect(refusal(withBytes('@@', [0xff])).field).to.equal('(body)');
  });

  it('refuses valid UTF-8 that is not JSON with a 400, not a 422', () => {
    expect(() => parseUtf8Json(Buffer.from('{"a":'))).to.throw(InvalidJsonError);
  });
});
