import ipaddr from 'ipaddr.js';

/** A parsed CIDR range; IPv4-mapped IPv6 addresses are compared as IPv4. */
export interface Cidr {
  readonly text: string;
  readonly range: [ipaddr.IPv4 | ipaddr.IPv6, number];
}

/** Parses "10.0.0.0/8" or a bare address (a /32 or /128); throws naming the bad entry. */
export function parseCidr(text: string): Cidr {
  const trimmed = text.trim();
  try {
    if (ipaddr.isValidCIDR(trimmed)) {
      const [address, bits] = ipaddr.parseCIDR(trimmed);
      const normalised = normaliseAddress(address);
      const prefix = normalised.kind() === 'ipv4' && address.kind() === 'ipv6' ? bits - 96 : bits;
      return { text: `${normalised.toString()}/${prefix}`, range: [normalised, prefix] };
    }
    const address = normaliseAddress(ipaddr.parse(trimmed));
    const bits = address.kind() === 'ipv4' ? 32 : 128;
    return { text: `${address.toString()}/${bits}`, range: [address, bits] };
  } catch {
    throw new Error(`"${trimmed}" is not an IP address or CIDR range`);
  }
}

export function parseCidrList(items: readonly string[]): Cidr[] {
  return items.map(parseCidr);
}

/** Parses a socket or header address; undefined when it is not an IP address. */
export function parseAddress(text: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  try {
    return normaliseAddress(ipaddr.parse(text.trim()));
  } catch {
    return undefined;
  }
}

export function addressInRanges(address: ipaddr.IPv4 | ipaddr.IPv6, ranges: readonly Cidr[]): boolean {
  return ranges.some(({ range }) => range[0].kind() === address.kind() && address.match(range));
}

function normaliseAddress(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (address as ipaddr.IPv6).toIPv4Address();
  }
  return address;
}
