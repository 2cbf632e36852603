import { expect } from 'chai';
import { StatementNames } from '../../src/db/database.ts';

describe('names of prepared statements', () => {
  it('names a text the same way every time, and a different text differently', () => {
    const names = new StatementNames(10);
    const first = names.nameOf('SELECT 1');
    expect(first).to.match(/^q_[0-9a-f]{20}$/);
    expect(names.nameOf('SELECT 1')).to.equal(first);
    expect(names.nameOf('SELECT 2')).not.to.equal(first);
  });

  it('names no more texts than its bound, so callers cannot grow the plan caches of the backends', () => {
    const names = new StatementNames(3);
    const named = ['a', 'b', 'c'].map((text) => names.nameOf(`SELECT '${text}'`));
    expect(named.every((name) => name !== undefined)).to.equal(true);
    expect(names.nameOf("SELECT 'd'")).to.equal(undefined);
    // The texts named before the bound keep their names.
    expect(names.nameOf("SELECT 'a'")).to.equal(named[0]);
  });
});
