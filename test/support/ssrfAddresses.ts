/**
 * IPv6 forms that carry an IPv4 address, each with the IPv4 address it carries. The client address of a
 * Teredo address is stored inverted: 80ff:fffe is 127.0.0.1, a247:28f1 is 93.184.215.14.
 */
export const CARRYING_REFUSED_IPV4: Array<[string, string]> = [
  ['::7f00:1', 'IPv4-compatible 127.0.0.1'],
  ['::a9fe:a9fe', 'IPv4-compatible 169.254.169.254'],
  ['::a00:5', 'IPv4-compatible 10.0.0.5'],
  ['::ffff:a9fe:a9fe', 'IPv4-mapped 169.254.169.254'],
  ['::ffff:0:7f00:1', 'SIIT-translated 127.0.0.1'],
  ['64:ff9b::7f00:1', 'NAT64 127.0.0.1'],
  ['64:ff9b::a9fe:a9fe', 'NAT64 169.254.169.254'],
  ['2002:7f00:1::', '6to4 of 127.0.0.1'],
  ['2002:a9fe:a9fe::1', '6to4 of 169.254.169.254'],
  ['2002:c0a8:101:1::1', '6to4 of 192.168.1.1'],
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'Teredo client 127.0.0.1'],
  ['2001:0:a9fe:a9fe:8000:63bf:a247:28f1', 'Teredo server 169.254.169.254'],
];

export const CARRYING_PUBLIC_IPV4: Array<[string, string]> = [
  ['::ffff:5db8:d70e', 'IPv4-mapped 93.184.215.14'],
  ['64:ff9b::5db8:d70e', 'NAT64 93.184.215.14 (what DNS64 answers in an IPv6-only cluster)'],
  ['2002:5db8:d70e::1', '6to4 of 93.184.215.14'],
  ['2001:0:4136:e378:8000:63bf:a247:28f1', 'Teredo with public server and client'],
];
