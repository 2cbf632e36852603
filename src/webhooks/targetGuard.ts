import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The SSRF guard (DESIGN.md §2): a webhook may only reach public unicast addresses. Checked when an
 * endpoint is registered and again on every delivery, where the connection goes to the very address that
 * was checked (the lookup below is the socket's own), so a DNS answer that changes between check and
 * connect (rebinding) cannot smuggle a private target in.
 */

export class BlockedTargetError extends Error {
  override name = 'BlockedTargetError';
  readonly code = 'EBLOCKEDTARGET';
}

export interface TargetPolicy {
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: skip the guard (development, tests, in-cluster receivers). */
  readonly allowPrivateTargets: boolean;
}

/**
 * Why an address may not be a webhook target, or undefined when it is public unicast. IPv4-mapped IPv6
 * is judged as the IPv4 address it carries; translation and tunnelling prefixes (NAT64, 6to4, Teredo)
 * are refused outright, since they can embed any IPv4 address.
 */
export function blockedAddressReason(address: string): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return 'is not an IP address';
  }
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  const range = parsed.range();
  // ipaddr.js names every special-purpose block; anything but ordinary unicast is internal, reserved,
  // or a way to reach something that is (metadata services sit in link-local and carrier-grade NAT space).
  return range === 'unicast' ? undefined : `resolves to a ${range} address (${parsed.toString()})`;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A drop-in for dns.lookup, for net/tls `connect` options: resolves as usual, then fails the connection
 * when any answer is not public. Refusing on any bad answer (not just filtering it out) keeps a name that
 * mixes public and private addresses from being used to probe the inside.
 */
export function guardedLookup(hostname: string, options: { all?: boolean; family?: number | string }, callback: LookupCallback): void {
  dnsLookup(hostname, { all: true, family: normaliseFamily(options.family), verbatim: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const blocked = addresses.map((entry) => blockedAddressReason(entry.address)).find((reason) => reason !== undefined);
    if (blocked) return callback(new BlockedTargetError(`${hostname} ${blocked}`), []);
    if (options.all) return callback(null, addresses);
    const first = addresses[0]!;
    callback(null, first.address, first.family);
  });
}

function normaliseFamily(family: number | string | undefined): 0 | 4 | 6 {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
}

/** Registration-time check of a URL's host: undefined when acceptable, else the reason. */
export async function targetProblem(url: URL, policy: TargetPolicy): Promise<string | undefined> {
  if (policy.allowPrivateTargets) return undefined;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host)) return blockedAddressReason(host) ? `host ${blockedAddressReason(host)}` : undefined;
  try {
    const addresses = await new Promise<LookupAddress[]>((resolve, reject) =>
      dnsLookup(host, { all: true, verbatim: true }, (error, found) => (error ? reject(error) : resolve(found))),
    );
    const blocked = addresses.map((entry) => blockedAddressReason(entry.address)).find((reason) => reason !== undefined);
    return blocked ? `host ${blocked}` : undefined;
  } catch {
    return 'host does not resolve';
  }
}
