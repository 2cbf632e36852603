import { expect } from 'chai';
import { clientAddress } from '../../src/auth/clientAddress.ts';
import { parseCidr } from '../../src/platform/cidr.ts';

const PROXIES = [parseCidr('10.0.0.0/8'), parseCidr('fd00::/8')];

describe('the client address behind trusted proxies', () => {
  it('is the socket peer when no proxy is trusted, whatever X-Forwarded-For says', () => {
    expect(clientAddress('10.1.2.3', '198.51.100.9', [])).to.equal('10.1.2.3');
  });

  it('is the socket peer when the peer is not a trusted proxy: a client cannot choose its address', () => {
    expect(clientAddress('203.0.113.5', '198.51.100.9', PROXIES)).to.equal('203.0.113.5');
  });

  it('is the hop the trusted proxy saw, read right to left', () => {
    expect(clientAddress('10.0.0.2', '198.51.100.9', PROXIES)).to.equal('198.51.100.9');
    // A client that writes the header itself only adds hops to the left of what the proxy appended.
    expect(clientAddress('10.0.0.2', '192.0.2.66, 198.51.100.9', PROXIES)).to.equal('198.51.100.9');
  });

  it('passes over proxies of its own to the first hop that is not trusted', () => {
    expect(clientAddress('10.0.0.2', '198.51.100.9, 10.9.9.9,10.8.8.8', PROXIES)).to.equal('198.51.100.9');
  });

  it('stops at a hop that is not an address, keeping the last good one', () => {
    expect(clientAddress('10.0.0.2', '198.51.100.9, unknown, 10.8.8.8', PROXIES)).to.equal('10.8.8.8');
    expect(clientAddress('10.0.0.2', 'garbage', PROXIES)).to.equal('10.0.0.2');
  });

  it('is the peer when the header is empty, and unmapped from its IPv4-in-IPv6 form', () => {
    expect(clientAddress('10.0.0.2', ' , ', PROXIES)).to.equal('10.0.0.2');
    expect(clientAddress('::ffff:203.0.113.5', undefined, PROXIES)).to.equal('203.0.113.5');
  });

  it('handles IPv6 proxies and clients', () => {
    expect(clientAddress('fd00::1', '2001:db8::7', PROXIES)).to.equal('2001:db8::7');
  });

  it('is the socket text as given when it is not an address, and empty without one', () => {
    expect(clientAddress('/run/audit.sock', '198.51.100.9', PROXIES)).to.equal('/run/audit.sock');
    expect(clientAddress(undefined, '198.51.100.9', PROXIES)).to.equal('');
  });
});
