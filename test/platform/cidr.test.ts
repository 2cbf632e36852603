import { expect } from 'chai';
import { addressInRanges, parseAddress, parseCidr, parseCidrList } from '../../src/platform/cidr.ts';

/** TRUSTED_PROXIES and the like: which client addresses fall in the ranges an operator configured. */
describe('CIDR ranges of the configuration', () => {
  it('reads ranges and bare addresses, a bare address as a single host', () => {
    expect(parseCidr('10.0.0.0/8').text).to.equal('10.0.0.0/8');
    expect(parseCidr(' 192.168.1.7 ').text).to.equal('192.168.1.7/32');
    expect(parseCidr('2001:db8::/32').text).to.equal('2001:db8::/32');
    expect(parseCidr('::1').text).to.equal('::1/128');
  });

  it('takes an IPv4-mapped IPv6 range as the IPv4 range it is', () => {
    expect(parseCidr('::ffff:10.0.0.0/104').text).to.equal('10.0.0.0/8');
  });

  it('refuses what is not an address, naming the entry', () => {
    expect(() => parseCidrList(['10.0.0.0/8', 'proxy.internal'])).to.throw('"proxy.internal" is not an IP address or CIDR range');
    expect(() => parseCidr('10.0.0.0/33')).to.throw('is not an IP address or CIDR range');
  });

  it('matches addresses in a range, IPv4-mapped ones as IPv4, and never across families', () => {
    const ranges = parseCidrList(['10.0.0.0/8', 'fd00::/8']);
    expect(addressInRanges(parseAddress('10.1.2.3')!, ranges)).to.equal(true);
    expect(addressInRanges(parseAddress('::ffff:10.1.2.3')!, ranges)).to.equal(true);
    expect(addressInRanges(parseAddress('fd12::1')!, ranges)).to.equal(true);
    expect(addressInRanges(parseAddress('11.0.0.1')!, ranges)).to.equal(false);
    expect(addressInRanges(parseAddress('::ffff:11.0.0.1')!, ranges)).to.equal(false);
  });

  it('reads no address from a header value that is not one', () => {
    expect(parseAddress('unknown')).to.equal(undefined);
    expect(parseAddress('10.0.0.1, 10.0.0.2')).to.equal(undefined);
  });
});
