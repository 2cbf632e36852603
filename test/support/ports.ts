import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** The kernel's range for ports it hands out itself (listen(0), outgoing connections); Linux, else the default. */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high)) return [low!, high!];
  } catch {
    // Not Linux: assume the usual range.
  }
  return [32768, 60999];
}

async function canListen(port: number): Promise<boolean> {
  const server = createServer();
  try {
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    return true;
  } catch {
    return false;
  } finally {
    server.close();
  }
}

/**
 * A loopback port free right now, for a server that must be told its port up front (a child process, or a
 * server a test stops and starts again on the same port). It lies outside the kernel's ephemeral range, so
 * that between this check and the server's bind no listen(0) of another test run on the machine is given
 * it, and while a restarted server is down no client reconnecting to it can end up connected to itself
 * (TCP simultaneous open, which only a port in the ephemeral range allows).
 */
export async function freePort(): Promise<number> {
  const [low, high] = ephemeralRange();
  const [from, to] = low > 12_000 ? [10_000, low] : [high + 1, 65_536];
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const port = randomInt(from, to);
    if (await canListen(port)) return port;
  }
  throw new Error(`No free port between ${from} and ${to - 1}`);
}
