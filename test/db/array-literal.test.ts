import { expect } from 'chai';
import { booleanArrayLiteral, lineSeparatedList, numberArrayLiteral, textArrayLiteral } from '../../src/db/arrayLiteral.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

describe('array literals for batch parameters', () => {
  let database: TestDatabase;

  before(async () => {
    database = await createTestDatabase();
  });

  after(async () => {
    await database.drop();
  });

  const roundTrip = async (literal: string, type: 'text' | 'boolean' | 'int' | 'bigint' | 'float8') =>
    (await database.pool.query(`SELECT $1::${type}[] AS elements`, [literal])).rows[0].elements as unknown[];

  it('carries text that Postgres array syntax gives a meaning to through unchanged', async () => {
    const values = [
      '',
      'NULL',
      'null',
      'a,b',
      '{x}',
      '}',
      '{',
      'say "hi"',
      'back\\slash',
      '\\"',
      '"',
      '\\',
      ' spaced ',
      'tab\tnew\nline',
      'ünïcødé ✓ 🩺',
      '{"ward":"3\\"b"}',
      '["diagnosis","medications"]',
    ];
    expect(await roundTrip(textArrayLiteral(values), 'text')).to.deep.equal(values);
  });

  it('carries random printable text through unchanged', async () => {
    const alphabet = ' "\\{},abcXYZ019\'\t\n;:é';
    const values = Array.from({ length: 500 }, () =>
      Array.from({ length: Math.floor(Math.random() * 12) }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join(''),
    );
    expect(await roundTrip(textArrayLiteral(values), 'text')).to.deep.equal(values);
  });

  it('writes empty arrays and booleans', async () => {
    expect(await roundTrip(textArrayLiteral([]), 'text')).to.deep.equal([]);
    expect(await roundTrip(booleanArrayLiteral([true, false, false, true]), 'boolean')).to.deep.equal([true, false, false, true]);
  });

  it('keeps NULL apart from the text NULL, in every kind of array', async () => {
    expect(await roundTrip(textArrayLiteral([null, 'NULL', '', null]), 'text')).to.deep.equal([null, 'NULL', '', null]);
    expect(await roundTrip(booleanArrayLiteral([true, null, false]), 'boolean')).to.deep.equal([true, null, false]);
    expect(await roundTrip(numberArrayLiteral([null, 7, null]), 'int')).to.deep.equal([null, 7, null]);
  });

  it('writes numbers, and bigint ids given as text, as Postgres reads them back', async () => {
    expect(await roundTrip(numberArrayLiteral(['9223372036854775807', '-12', 0, 42]), 'bigint')).to.deep.equal([
      '9223372036854775807',
      '-12',
      '0',
      '42',
    ]);
    const instants = [1_764_950_400_123, 0.5, -1.25, 1e21];
    expect(await roundTrip(numberArrayLiteral(instants), 'float8')).to.deep.equal(instants);
  });

  it('refuses an element that is not a number rather than write it bare', () => {
    for (const bad of ['1,2', '1}', 'NULL', '', ' 1', '1.5', Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => numberArrayLiteral([bad]), String(bad)).to.throw(/not a number/);
    }
  });

  it('carries JSON text through a line-separated list unchanged', async () => {
    const values = [
      JSON.stringify({ note: 'line\nfeed "quoted" back\\slash {}', list: [1, null] }),
      '{}',
      JSON.stringify('ünïcødé ✓'),
      '[]',
    ];
    const { rows } = await database.pool.query(`SELECT string_to_array($1, E'\\n') AS elements`, [lineSeparatedList(values)]);
    expect(rows[0].elements).to.deep.equal(values);
  });

  it('refuses an element a line-separated list cannot carry', () => {
    expect(() => lineSeparatedList(['{}', 'raw\nline'])).to.throw(/line feed/);
    expect(() => lineSeparatedList([''])).to.throw(/empty/);
  });
});
