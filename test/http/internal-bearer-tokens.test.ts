import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import Koa from 'koa';
import { requireBearerToken } from '../../src/http/bearerTokens.ts';
import { errorBoundary } from '../../src/http/errorBoundary.ts';
import type { RequestState } from '../../src/http/state.ts';
import { trailResponseHeaders } from '../../src/http/trailResponseHeaders.ts';
import { createLogger } from '../../src/platform/logger.ts';

/**
 * The internal port's gate for producers and operators (INGEST_TOKENS, OPERATOR_TOKENS), and the headers
 * every answer of the public app carries, on a Koa app of their own over loopback.
 */
describe('bearer tokens of the internal port, and the trail’s response headers', () => {
  let server: Server;
  let base: string;

  before(async () => {
    const app = new Koa<RequestState>();
    const log = createLogger('silent', new Writable({ write: (_chunk, _encoding, done) => done() }));
    app.use(async (ctx, next) => {
      ctx.state.requestId = 'req-1';
      ctx.state.log = log;
      await next();
    });
    app.use(trailResponseHeaders());
    app.use(errorBoundary());
    app.use(requireBearerToken(['ingest-token-one', 'ingest-token-two'], 'ingest token'));
    app.use((ctx) => {
      ctx.body = { accepted: true };
    });
    server = createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const send = (authorization?: string) => fetch(base, { headers: authorization === undefined ? {} : { authorization } });

  it('lets a request through with any of the configured tokens', async () => {
    for (const token of ['ingest-token-one', 'ingest-token-two']) {
      const response = await send(`Bearer ${token}`);
      expect(response.status, token).to.equal(200);
      expect(await response.json()).to.deep.equal({ accepted: true });
    }
  });

  it('refuses a missing, unknown, partial or differently framed token with the same 401', async () => {
    for (const authorization of [
      undefined,
      'Bearer nope',
      'Bearer ingest-token',
      'bearer ingest-token-one',
      'ingest-token-one',
      'Bearer ',
    ]) {
      const response = await send(authorization);
      expect(response.status, String(authorization)).to.equal(401);
      expect(await response.text()).to.equal('{"error":"unauthorized"}');
    }
  });

  it('keeps every answer, errors included, out of caches and from being sniffed as another type', async () => {
    for (const response of [await send('Bearer ingest-token-one'), await send()]) {
      expect(response.headers.get('cache-control')).to.equal('no-store');
      expect(response.headers.get('x-content-type-options')).to.equal('nosniff');
    }
  });
});
