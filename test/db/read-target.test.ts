import { expect } from 'chai';
import { readTarget } from '../../src/db/replicaReads.ts';

describe('where a read that can wait goes', () => {
  it('goes to the replica while its lag is within the bound, the bound included', () => {
    expect(readTarget(0, 5_000)).to.equal('replica');
    expect(readTarget(5_000, 5_000)).to.equal('replica');
  });

  it('goes to the primary, saying why, when the replica lags beyond the bound or did not answer', () => {
    expect(readTarget(5_001, 5_000)).to.equal('lag');
    expect(readTarget(undefined, 5_000)).to.equal('unavailable');
  });
});
