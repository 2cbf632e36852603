import { addressInRanges, parseAddress, type Cidr } from '../platform/cidr.ts';

/**
 * The client's address for allow-lists and auth-failure limiting. X-Forwarded-For is believed only when
 * the socket peer is a trusted proxy, and then only up to the first hop that is not itself trusted
 * (read right to left), so a client cannot choose its address by sending the header itself.
 */
export function clientAddress(socketAddress: string | undefined, forwardedFor: string | undefined, trusted: readonly Cidr[]): string {
  const peer = socketAddress ? parseAddress(socketAddress) : undefined;
  if (!peer) return socketAddress ?? '';
  if (trusted.length === 0 || !forwardedFor || !addressInRanges(peer, trusted)) return peer.toString();
  const hops = forwardedFor
    .split(',')
    .map((hop) => hop.trim())
    .filter((hop) => hop.length > 0);
  let candidate = peer;
  for (let index = hops.length - 1; index >= 0; index -= 1) {
    const hop = parseAddress(hops[index]!);
    if (!hop) break;
    candidate = hop;
    if (!addressInRanges(hop, trusted)) break;
  }
  return candidate.toString();
}
