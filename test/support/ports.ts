import { once } from 'node:events';
import { createServer } from 'node:net';

/** A loopback port free right now, for a child process that must be told its port up front. */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}
