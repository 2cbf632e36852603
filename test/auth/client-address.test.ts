import { expect } from 'chai';
import { clientAddress } from '../../src/auth/clientAddress.ts';
import { parseCidrList } from '../../src/platform/cidr.ts';

const proxies = parseCidrList(['10.0.0.0/8']);

/** The address auth-failure limits and allow-lists go by (TRUSTED_PROXIES, docs/configuration.md). */
describe('a request’s client address', () => {
  it('is the socket’s peer when no proxy is trusted, whatever X-Forwarded-For says', () => {
    expect(clientAddress('203.0.113.7', '198.51.100.1', [])).to.equal('203.0.113.7');
  });

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy, so a client cannot choose its address', () => {
    expect(clientAddress('203.0.113.7', '198.51.100.1', proxies)).to.equal('203.0.113.7');
  });

  it('believes a trusted proxy, reading hops right to left up to the first that is not itself trusted', () => {
    expect(clientAddress('10.0.0.2', '198.51.100.1', proxies)).to.equal('198.51.100.1');
    expect(clientAddress('10.0.0.2', '198.51.100.1, 10.0.0.9', proxies)).to.equal('198.51.100.1');
    // A client that sends its own header gets its forged hop ignored: the first untrusted hop from the right wins.
    expect(clientAddress('10.0.0.2', '6.6.6.6, 198.51.100.1, 10.0.0.9', proxies)).to.equal('198.51.100.1');
  });

  it('stops at a hop that is not an address, keeping the last one it could read', () => {
    expect(clientAddress('10.0.0.2', 'garbage, 10.0.0.9', proxies)).to.equal('10.0.0.9');
    expect(clientAddress('10.0.0.2', ' , ', proxies)).to.equal('10.0.0.2');
  });

  it('writes IPv4-mapped peers as IPv4, and passes through a socket address it cannot read', () => {
    expect(clientAddress('::ffff:203.0.113.7', undefined, proxies)).to.equal('203.0.113.7');
    expect(clientAddress('unix-socket', undefined, proxies)).to.equal('unix-socket');
    expect(clientAddress(undefined, '198.51.100.1', proxies)).to.equal('');
  });
});
