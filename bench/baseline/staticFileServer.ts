/**
 * Baseline of the tiles benchmark: the plainest static file server a Node developer would write — node:http
 * serving the file at the request's path under ROOT (the same tiles `audit-trail integrity publish` wrote)
 * with fs.readFile, or 404. No authentication, no rate limiting, no database.
 *   GET /<path under ROOT>   on PORT
 */
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join, normalize } from 'node:path';

const root = process.env.ROOT!;

const server = createServer(async (request, response) => {
  const path = normalize(new URL(request.url!, 'http://localhost').pathname).replace(/^(\.\.(\/|$))+/, '');
  try {
    const body = await readFile(join(root, path));
    response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length }).end(body);
  } catch {
    response.writeHead(404).end();
  }
});
server.listen(Number(process.env.PORT), '127.0.0.1');
