import { expect } from 'chai';
import { Releasers } from '../../src/platform/shutdown.ts';

/** What main.ts opens is closed in reverse order, each even when another failed (STYLE.md "Explicit lifetimes"). */
describe('releasing what the service opened', () => {
  it('releases in reverse order of opening, so that users of a pool stop before it', async () => {
    const order: string[] = [];
    const releasers = new Releasers();
    for (const name of ['pool', 'bus', 'http server']) releasers.add(name, async () => void order.push(name));
    await releasers.releaseAll();
    expect(order).to.deep.equal(['http server', 'bus', 'pool']);
  });

  it('goes on releasing after one fails', async () => {
    const order: string[] = [];
    const releasers = new Releasers();
    releasers.add('pool', () => void order.push('pool'));
    releasers.add('bus', () => {
      throw new Error('drain timed out');
    });
    releasers.add('server', () => void order.push('server'));
    await releasers.releaseAll();
    expect(order).to.deep.equal(['server', 'pool']);
  });

  it('releases once, however often it is asked (a second signal during the stop)', async () => {
    let releases = 0;
    const releasers = new Releasers();
    releasers.add('pool', () => {
      releases += 1;
    });
    await Promise.all([releasers.releaseAll(), releasers.releaseAll()]);
    await releasers.releaseAll();
    expect(releases).to.equal(1);
  });
});
