import { expect } from 'chai';
import { blockedAddressReason } from '../../src/webhooks/targetGuard.ts';
import { CARRYING_PUBLIC_IPV4, CARRYING_REFUSED_IPV4 } from '../support/ssrfAddresses.ts';

describe('webhook SSRF guard: addresses', () => {
  for (const [address, what] of CARRYING_REFUSED_IPV4) {
    it(`refuses ${address} (${what})`, () => {
      expect(blockedAddressReason(address)).to.be.a('string');
    });
  }

  it('refuses the local-use NAT64 prefix, whose IPv4 position only the site knows', () => {
    expect(blockedAddressReason('64:ff9b:1::a9fe:a9fe')).to.match(/local-use NAT64/);
    expect(blockedAddressReason('64:ff9b:1:5db8:d70e::')).to.match(/local-use NAT64/);
  });

  it('names the IPv4 address it judged', () => {
    expect(blockedAddressReason('::7f00:1')).to.equal('resolves to ::7f00:1, which carries 127.0.0.1, a loopback address');
  });

  it('refuses private, loopback, link-local and metadata IPv4 addresses, and accepts public ones', () => {
    for (const address of ['10.0.0.5', '127.0.0.1', '169.254.169.254', '192.168.1.1', '172.16.0.1', '0.0.0.0'])
      expect(blockedAddressReason(address), address).to.be.a('string');
    expect(blockedAddressReason('93.184.215.14')).to.equal(undefined);
  });

  it('still calls ::1 and :: what they are', () => {
    expect(blockedAddressReason('::1')).to.match(/loopback address \(::1\)/);
    expect(blockedAddressReason('::')).to.match(/unspecified address/);
  });

  for (const [address, what] of CARRYING_PUBLIC_IPV4) {
    it(`accepts ${address} (${what})`, () => {
      expect(blockedAddressReason(address)).to.equal(undefined);
    });
  }
});
