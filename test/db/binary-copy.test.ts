import { expect } from 'chai';
import { BinaryRows, copyOutBinary, sqlBoolean, sqlInteger, sqlLiteral } from '../../src/db/binaryCopy.ts';
import { Database } from '../../src/db/database.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { testLogger } from '../support/service.ts';

/** Text that SQL literals, COPY's text format and JSON each give a meaning to, and characters outside ASCII. */
const AWKWARD = [
  '',
  "it's",
  "''",
  'back\\slash',
  '\\x41',
  "E'\\n'",
  'tab\tnew\nline\r',
  '$1',
  '$$dollar$$',
  '\u0001\u001f\u007f',
  'ünïcødé ✓ 🩺',
  'NULL',
  '--',
  '/*',
];

describe('binary COPY reads', () => {
  let database: TestDatabase;
  let db: Database;

  before(async () => {
    database = await createTestDatabase();
    // One connection: a COPY that failed must not leave it unusable for the next statement.
    db = new Database({ url: database.url, poolSize: 1, applicationName: 'binary copy test', log: testLogger() });
  });

  after(async () => {
    await db?.close();
    await database?.drop();
  });

  it('reads each type in place: int8, int4, boolean, text, uuid and NULL', async () => {
    const rows = new BinaryRows(
      await copyOutBinary(
        db,
        `SELECT n::int8 * 4000000000, n::int4, n % 2 = 0, CASE WHEN n = 2 THEN NULL ELSE 'row ' || n || ' ✓' END,
              ('0198f3a0-0000-7000-8000-' || lpad(n::text, 12, '0'))::uuid
         FROM generate_series(1, 3) AS n ORDER BY n`,
      ),
    );
    const read: unknown[][] = [];
    // In any order: a row is found once, and selected again.
    for (const index of [2, 0, 1]) {
      rows.select(index);
      expect(rows.fieldCount).to.equal(5);
      read[index] = [rows.integer(0), rows.integer(1), rows.boolean(2), rows.text(3), rows.isNull(3), rows.uuid(4)];
    }
    expect(read).to.deep.equal([
      [4_000_000_000, 1, false, 'row 1 ✓', false, '0198f3a0-0000-7000-8000-000000000001'],
      [8_000_000_000, 2, true, null, true, '0198f3a0-0000-7000-8000-000000000002'],
      [12_000_000_000, 3, false, 'row 3 ✓', false, '0198f3a0-0000-7000-8000-000000000003'],
    ]);
    expect(rows.rowCount).to.equal(3);
    expect(() => rows.select(3)).to.throw(RangeError);
  });

  it('gives a text field its exact bytes, which a caller copies as they are', async () => {
    const rows = new BinaryRows(await copyOutBinary(db, `SELECT ${sqlLiteral('ünïcødé 🩺')}`));
    rows.select(0);
    expect(rows.bytes.subarray(rows.start(0), rows.end(0))).to.deep.equal(Buffer.from('ünïcødé 🩺', 'utf8'));
  });

  it('carries every text through sqlLiteral unchanged, whatever the server makes of backslashes', async () => {
    for (const conforming of ['on', 'off']) {
      const client = await db.connect();
      try {
        await client.query(`SET standard_conforming_strings = ${conforming}`);
        for (const text of AWKWARD) {
          const { rows } = await client.query(`SELECT ${sqlLiteral(text)} AS text`);
          expect(rows[0].text, `standard_conforming_strings ${conforming}`).to.equal(text);
        }
      } finally {
        await client.query('RESET standard_conforming_strings');
        client.release();
      }
    }
    const rows = new BinaryRows(await copyOutBinary(db, AWKWARD.map((text) => `SELECT ${sqlLiteral(text)}`).join(' UNION ALL ')));
    const read = Array.from({ length: rows.rowCount }, (_, index) => {
      rows.select(index);
      return rows.text(0);
    });
    expect(read).to.deep.equal(AWKWARD);
  });

  it('writes integers and booleans as SQL, and refuses anything that is not an integer', async () => {
    expect([sqlInteger(0), sqlInteger(-12), sqlInteger(2 ** 53 - 1)]).to.deep.equal(['0', '-12', '9007199254740991']);
    for (const bad of [1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) expect(() => sqlInteger(bad)).to.throw(TypeError);
    const { rows } = await db.query(`SELECT ${sqlBoolean(true)} AS t, ${sqlBoolean(false)} AS f, ${sqlBoolean(undefined)} AS n`);
    expect(rows[0]).to.deep.equal({ t: true, f: false, n: null });
  });

  it('rejects with Postgres error when the statement fails, and the pool goes on', async () => {
    const failure = await copyOutBinary(db, 'SELECT 1 / (n - 2) FROM generate_series(1, 3) AS n').catch((error: unknown) => error);
    expect((failure as { code?: string }).code).to.equal('22012');
    const missing = await copyOutBinary(db, 'SELECT * FROM no_such_table').catch((error: unknown) => error);
    expect((missing as { code?: string }).code).to.equal('42P01');
    const rows = new BinaryRows(await copyOutBinary(db, 'SELECT 7'));
    rows.select(0);
    expect(rows.integer(0)).to.equal(7);
    expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).to.equal(1);
  });

  it('refuses bytes that are not a whole binary COPY result', async () => {
    const bytes = await copyOutBinary(db, 'SELECT n, repeat(md5(n::text), 3) FROM generate_series(1, 5) AS n');
    expect(() => new BinaryRows(bytes.subarray(0, bytes.length - 2))).to.throw(/without its trailer/);
    expect(() => new BinaryRows(bytes.subarray(0, 40))).to.throw(/cut short|without its trailer/);
    expect(() => new BinaryRows(Buffer.from('not a copy result at all'))).to.throw(/not the binary COPY format/);
  });

  it('reads a result of many megabytes arriving in many chunks', async () => {
    const rows = new BinaryRows(
      await copyOutBinary(db, `SELECT n::int8, repeat(md5(n::text), 20) FROM generate_series(1, 20000) AS n ORDER BY n`),
    );
    expect(rows.rowCount).to.equal(20_000);
    for (let index = 0; index < rows.rowCount; index += 1) {
      rows.select(index);
      expect(rows.integer(0)).to.equal(index + 1);
      expect(rows.end(1) - rows.start(1)).to.equal(640);
    }
    expect(rows.bytes.length).to.be.greaterThan(12_000_000);
  });
});
