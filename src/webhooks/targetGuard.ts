import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The SSRF guard (docs/webhooks.md): a webhook may only reach public unicast addresses. Checked when an
 * endpoint is registered and again on every delivery, where the connection goes to the very address that
 * was checked (the lookup below is the socket's own), so a DNS answer that changes between check and
 * connect (rebinding) cannot smuggle a private target in.
 */

class BlockedTargetError extends Error {
  override name = 'BlockedTargetError';
  readonly code = 'EBLOCKEDTARGET';
}

/** A guarded name that gave no answer: retried like any DNS failure, described like a refusal. */
class UnresolvedTargetError extends Error {
  override name = 'UnresolvedTargetError';
  readonly code: string | undefined;
  constructor(code: string | undefined) {
    super(NOT_A_PUBLIC_ADDRESS);
    this.code = code;
  }
}

/**
 * Whether a failed connection was the guard's doing: a refused address, or a name that did not resolve,
 * which a tenant must not be able to tell apart (see NOT_A_PUBLIC_ADDRESS).
 */
export function isGuardFailure(cause: { name?: string } | undefined): boolean {
  return cause?.name === 'BlockedTargetError' || cause?.name === 'UnresolvedTargetError';
}

/**
 * The one thing a refusal says, wherever a tenant can read it (a 422, a test send, `last_error`, a stream's
 * status): not the address the name resolved to, not which range it lies in, not whether the name resolved
 * at all. Each of those would let a tenant map the inside's DNS one registration at a time.
 */
const NOT_A_PUBLIC_ADDRESS = 'host is not a public address';

/** What a refused delivery or stream send records: the guard refused, and nothing about the address. */
export const TARGET_REFUSED = `target refused: ${NOT_A_PUBLIC_ADDRESS}`;

export interface TargetPolicy {
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: skip the guard (development, tests, in-cluster receivers). */
  readonly allowPrivateTargets: boolean;
}

/**
 * Why an address may not be a webhook target, or undefined when it is public unicast. The reason is the
 * guard's own working (its tests read it); a tenant sees only NOT_A_PUBLIC_ADDRESS. An IPv6 address that
 * carries an IPv4 address (see ipv4CarriedBy) is judged as the IPv4 address(es) it carries: the host or
 * gateway that ends up on the wire is that IPv4 address, so `::7f00:1` or `2002:a9fe:a9fe::` must not reach
 * what 127.0.0.1 or 169.254.169.254 could not.
 */
export function blockedAddressReason(address: string): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return 'is not an IP address';
  }
  if (parsed.kind() === 'ipv4') {
    const range = parsed.range();
    return range === 'unicast' ? undefined : `resolves to a ${range} address (${parsed.toString()})`;
  }
  const ipv6 = parsed as ipaddr.IPv6;
  const carried = ipv4CarriedBy(ipv6);
  if (carried === 'unknown position') return `resolves to a local-use NAT64 address (${ipv6.toString()})`;
  if (carried !== undefined) {
    const refused = carried.find((ipv4) => ipv4.range() !== 'unicast');
    return refused && `resolves to ${ipv6.toString()}, which carries ${refused.toString()}, a ${refused.range()} address`;
  }
  const range = ipv6.range();
  // ipaddr.js names every special-purpose block; anything but ordinary unicast is internal, reserved,
  // or a way to reach something that is (metadata services sit in link-local and carrier-grade NAT space).
  return range === 'unicast' ? undefined : `resolves to a ${range} address (${ipv6.toString()})`;
}

const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');
const NAT64_LOCAL_USE = ipaddr.parseCIDR('64:ff9b:1::/48');
const IPV4_MAPPED = ipaddr.parseCIDR('::ffff:0:0/96');
const IPV4_TRANSLATED = ipaddr.parseCIDR('::ffff:0:0:0/96');
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');
const TEREDO = ipaddr.parseCIDR('2001::/32');

/**
 * The IPv4 addresses an IPv6 address stands for, when it is one of the forms that embed them: mapped
 * (::ffff:a.b.c.d), SIIT-translated (::ffff:0:a.b.c.d), the deprecated IPv4-compatible (::a.b.c.d), NAT64's
 * well-known prefix (64:ff9b::a.b.c.d), 6to4 (2002:AABB:CCDD::/48, the site's IPv4 in bits 16-47) and Teredo
 * (2001:0:SSSS:SSSS:…:CCCC:CCCC: the server's IPv4 in bits 32-63, the client's in the last 32 bits,
 * inverted). NAT64's local-use prefix puts the IPv4 address wherever the site's prefix length says, which
 * cannot be known from outside: 'unknown position'.
 */
function ipv4CarriedBy(ipv6: ipaddr.IPv6): ipaddr.IPv4[] | 'unknown position' | undefined {
  const bytes = ipv6.toByteArray();
  const ipv4At = (offset: number, invert = false) =>
    ipaddr.fromByteArray(bytes.slice(offset, offset + 4).map((byte) => (invert ? byte ^ 0xff : byte))) as ipaddr.IPv4;
  // :: and ::1 lie in the IPv4-compatible block too, but are the IPv6 unspecified and loopback addresses.
  const compatible = ipv6.match(IPV4_COMPATIBLE) && ipv6.range() === 'unicast';
  if (compatible || [IPV4_MAPPED, IPV4_TRANSLATED, NAT64_WELL_KNOWN].some((prefix) => ipv6.match(prefix))) return [ipv4At(12)];
  if (ipv6.match(NAT64_LOCAL_USE)) return 'unknown position';
  if (ipv6.match(SIX_TO_FOUR)) return [ipv4At(2)];
  if (ipv6.match(TEREDO)) return [ipv4At(4), ipv4At(12, true)];
  return undefined;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A drop-in for dns.lookup, for net/tls `connect` options: resolves as usual, then fails the connection
 * when any answer is not public. Refusing on any bad answer (not just filtering it out) keeps a name that
 * mixes public and private addresses from being used to probe the inside.
 */
export function guardedLookup(hostname: string, options: { all?: boolean; family?: number | string }, callback: LookupCallback): void {
  dnsLookup(hostname, { all: true, family: normaliseFamily(options.family), verbatim: true }, (error, addresses) => {
    // A name that does not resolve reads like one that resolves inside: the difference would tell a tenant
    // which internal names exist. Its code stays, so a transient failure (EAI_AGAIN) is still retried.
    if (error) return callback(new UnresolvedTargetError(error.code), []);
    const blocked = addresses.some((entry) => blockedAddressReason(entry.address) !== undefined);
    if (blocked) return callback(new BlockedTargetError(NOT_A_PUBLIC_ADDRESS), []);
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

/**
 * A URL naming an IP address never reaches the socket's DNS lookup, so senders check its literal here:
 * TARGET_REFUSED when refused, else undefined (a name is left to guardedLookup).
 */
export function literalTargetRefusal(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return isIP(host) && blockedAddressReason(host) !== undefined ? TARGET_REFUSED : undefined;
}

/**
 * Registration-time check of a URL's host: undefined when acceptable, else NOT_A_PUBLIC_ADDRESS, the same
 * for a private answer and for no answer at all.
 */
export async function targetProblem(url: URL, policy: TargetPolicy): Promise<string | undefined> {
  if (policy.allowPrivateTargets) return undefined;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host)) return blockedAddressReason(host) ? NOT_A_PUBLIC_ADDRESS : undefined;
  try {
    const addresses = await new Promise<LookupAddress[]>((resolve, reject) =>
      dnsLookup(host, { all: true, verbatim: true }, (error, found) => (error ? reject(error) : resolve(found))),
    );
    return addresses.some((entry) => blockedAddressReason(entry.address) !== undefined) ? NOT_A_PUBLIC_ADDRESS : undefined;
  } catch {
    return NOT_A_PUBLIC_ADDRESS;
  }
}
