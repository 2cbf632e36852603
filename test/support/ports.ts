import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { randomInt } from 'node:crypto';

/** A loopback port free right now, for a child process that must be told its port up front. */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
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

/** The kernel's range for outgoing connections' local ports (Linux), or its usual default. */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high)) return [low!, high!];
  } catch {
    // Not Linux: assume the usual range.
  }
  return [32768, 60999];
}

/**
 * A free loopback port for a server a test stops and starts again on the same port. It lies outside the
 * ephemeral range: while the server is down no outgoing connection can be given that port, and a client
 * reconnecting to it cannot end up connected to itself (TCP simultaneous open), which ports from
 * freePort() allow.
 */
export async function freeServicePort(): Promise<number> {
  const [low, high] = ephemeralRange();
  const [from, to] = low > 12_000 ? [10_000, low] : [high + 1, 65_536];
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const port = randomInt(from, to);
    if (await canListen(port)) return port;
  }
  throw new Error(`No free port between ${from} and ${to - 1}`);
}
