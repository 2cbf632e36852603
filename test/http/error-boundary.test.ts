import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import Koa from 'koa';
import { errorBoundary } from '../../src/http/errorBoundary.ts';
import type { RequestState } from '../../src/http/state.ts';
import { NotFoundError, RateLimitedError, ServiceUnavailableError, UnauthorizedError } from '../../src/platform/errors.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { ServiceMetrics } from '../../src/platform/metrics.ts';

/**
 * The one place errors become responses (docs/api.md "Errors"), on a Koa app of its own: what a route throws
 * at `/throw/<kind>` is what the boundary answers, over a real HTTP connection on loopback.
 */
describe('the HTTP error boundary', () => {
  const logged: string[] = [];
  const metrics = new ServiceMetrics();
  const thrown: Record<string, () => unknown> = {
    'missing-key': () => new UnauthorizedError('no Authorization header'),
    'revoked-key': () => new UnauthorizedError('key revoked'),
    'rate-limited': () => new RateLimitedError('read', 7),
    'not-found': () => new NotFoundError('No such event.'),
    unavailable: () => new ServiceUnavailableError('Postgres is not answering.'),
    bug: () => new TypeError('cannot read properties of undefined (secret=hunter2)'),
    string: () => 'thrown text',
  };
  let server: Server;
  let base: string;

  before(async () => {
    const app = new Koa<RequestState>();
    const sink = new Writable({
      write(chunk, _encoding, done) {
        logged.push(String(chunk));
        done();
      },
    });
    const log = createLogger('info', sink);
    app.use(async (ctx, next) => {
      ctx.state.requestId = 'req-123';
      ctx.state.log = log;
      await next();
    });
    app.use(errorBoundary(metrics));
    app.use((ctx) => {
      const kind = ctx.path.startsWith('/throw/') ? ctx.path.slice('/throw/'.length) : undefined;
      if (kind === undefined) {
        ctx.status = 405;
        return;
      }
      throw thrown[kind]!();
    });
    server = createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('answers every 401 with the same bytes, whatever the cause, and says why only in the log', async () => {
    const bodies = await Promise.all(
      ['missing-key', 'revoked-key'].map(async (kind) => {
        const response = await fetch(`${base}/throw/${kind}`);
        expect(response.status).to.equal(401);
        expect(response.headers.get('www-authenticate')).to.equal('Bearer');
        return response.text();
      }),
    );
    expect(bodies).to.deep.equal(['{"error":"unauthorized"}', '{"error":"unauthorized"}']);
    expect(logged.join('')).to.include('key revoked');
  });

  it('tells a rate-limited client when to come back', async () => {
    const response = await fetch(`${base}/throw/rate-limited`);
    expect(response.status).to.equal(429);
    expect(response.headers.get('retry-after')).to.equal('7');
    expect(await response.json()).to.deep.equal({ error: 'rate_limit_exceeded', scope: 'read', retry_after_s: 7 });
  });

  it('shows an AppError’s code and message, and asks a retry no sooner than Retry-After of a 503', async () => {
    const missing = await fetch(`${base}/throw/not-found`);
    expect([missing.status, await missing.json()]).to.deep.equal([404, { error: 'not_found', message: 'No such event.' }]);
    const unavailable = await fetch(`${base}/throw/unavailable`);
    expect(unavailable.status).to.equal(503);
    expect(unavailable.headers.get('retry-after')).to.equal('1');
    expect(await unavailable.json()).to.deep.include({ error: 'service_unavailable' });
  });

  it('answers anything else with a 500 that reveals only the request id, logging the error and counting it', async () => {
    for (const kind of ['bug', 'string']) {
      const response = await fetch(`${base}/throw/${kind}`);
      const body = await response.text();
      expect(response.status).to.equal(500);
      expect(JSON.parse(body)).to.deep.equal({
        error: 'internal_error',
        message: 'Internal server error. Quote the request id when reporting it.',
        request_id: 'req-123',
      });
      expect(body).not.to.include('hunter2').and.not.to.include('thrown text');
    }
    expect(logged.join('')).to.include('hunter2');
    expect(await metrics.registry.getSingleMetricAsString('audit_errors_total')).to.include('kind="http_5xx"} 2');
  });

  it('gives an answer without a body the JSON error shape', async () => {
    const response = await fetch(`${base}/elsewhere`);
    expect([response.status, await response.json()]).to.deep.equal([
      405,
      { error: 'method_not_allowed', message: 'GET is not allowed here; see the Allow header.' },
    ]);
  });
});
