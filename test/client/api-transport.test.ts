import { expect } from 'chai';
import {
  ApiTransport,
  AuditTrailApiError,
  AuditTrailUnreachableError,
  filterValues,
  ndjsonLines,
  toQuery,
} from '../../src/client/apiTransport.ts';

/** A transport whose fetch answers from `answers` in turn, recording each request. */
function transportAnswering(answers: Array<() => Response>, options: { maxRetries?: number } = {}) {
  const requests: Array<{ url: string; init: RequestInit | undefined }> = [];
  const transport = new ApiTransport({
    baseUrl: 'https://audit.example/api/',
    apiKey: 'ak_test_key',
    userAgent: 'billing/3.1',
    baseDelayMs: 1,
    maxDelayMs: 5,
    ...options,
    fetch: async (input, init) => {
      requests.push({ url: String(input), init });
      return answers.shift()!();
    },
  });
  return { transport, requests };
}

describe('the client’s transport', () => {
  it('sends the key, the agent and JSON to the base URL without its trailing slash', async () => {
    const { transport, requests } = transportAnswering([() => Response.json({ ok: true })]);
    await transport.request('POST', '/audit/export', { format: 'ndjson' });
    const headers = requests[0]!.init!.headers as Record<string, string>;
    expect(requests[0]!.url).to.equal('https://audit.example/api/audit/export');
    expect(headers).to.include({ authorization: 'Bearer ak_test_key', 'user-agent': 'billing/3.1', 'content-type': 'application/json' });
    expect(requests[0]!.init!.body).to.equal('{"format":"ndjson"}');
  });

  it('retries 429 and 503, and returns the answer that succeeds', async () => {
    const { transport, requests } = transportAnswering([
      () => Response.json({ error: 'rate_limit_exceeded' }, { status: 429 }),
      () => Response.json({ error: 'service_unavailable' }, { status: 503 }),
      () => Response.json({ events: [] }),
    ]);
    expect(await (await transport.request('GET', '/audit/events')).json()).to.deep.equal({ events: [] });
    expect(requests).to.have.length(3);
  });

  it('gives up after maxRetries with the documented error body, its code and the request id', async () => {
    const refusal = () =>
      Response.json(
        { error: 'rate_limit_exceeded', message: 'Rate limit exceeded.' },
        { status: 429, headers: { 'x-request-id': 'req-9' } },
      );
    const { transport, requests } = transportAnswering([refusal, refusal, refusal], { maxRetries: 2 });
    const error = await transport.request('GET', '/audit/events').catch((thrown: unknown) => thrown);
    expect(error).to.be.instanceOf(AuditTrailApiError);
    expect(error).to.include({
      status: 429,
      code: 'rate_limit_exceeded',
      requestId: 'req-9',
      message: 'HTTP 429 rate_limit_exceeded: Rate limit exceeded.',
    });
    expect(requests).to.have.length(3);
  });

  it('does not retry other errors, and names a body without a code http_error', async () => {
    const { transport, requests } = transportAnswering([() => new Response('<html>bad gateway</html>', { status: 502 })]);
    const error = (await transport.request('GET', '/audit/events').catch((thrown: unknown) => thrown)) as AuditTrailApiError;
    expect([error.status, error.code, error.message]).to.deep.equal([502, 'http_error', 'HTTP 502 http_error']);
    expect(requests).to.have.length(1);
  });

  it('names the address it could not reach and the network’s reason, keeping fetch’s error as the cause', async () => {
    const failure = new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
    const transport = new ApiTransport({ baseUrl: 'https://audit.example', apiKey: 'k', fetch: () => Promise.reject(failure) });
    const error = (await transport.request('GET', '/x').catch((thrown: unknown) => thrown)) as AuditTrailUnreachableError;
    expect(error).to.be.instanceOf(AuditTrailUnreachableError);
    expect(error.message).to.equal('cannot reach the service at https://audit.example: ECONNREFUSED');
    expect(error.cause).to.equal(failure);
  });

  it('waits at least what Retry-After asks, and at most the backoff’s ceiling otherwise', () => {
    const transport = new ApiTransport({ baseUrl: 'https://audit.example', apiKey: 'k', baseDelayMs: 100, maxDelayMs: 1000 });
    for (let attempt = 0; attempt < 20; attempt += 1) {
      expect(transport.backoffMs(attempt, '3')).to.be.at.least(3000);
      expect(transport.backoffMs(attempt)).to.be.within(0, Math.min(1000, 100 * 2 ** attempt));
    }
  });
});

describe('the client’s encodings', () => {
  it('writes instants in RFC 3339 and leaves out unset filters', () => {
    const values = filterValues({ since: new Date('2026-12-05T12:00:00Z'), action: 'phi.read', phi_involved: true, until: undefined });
    expect(toQuery(values)).to.equal('?since=2026-12-05T12%3A00%3A00.000Z&action=phi.read&phi_involved=true');
    expect(toQuery({ until: undefined })).to.equal('');
  });

  it('reads NDJSON lines split anywhere, a last line without a newline included, skipping empty ones', async () => {
    const bytes = new TextEncoder().encode('{"a":"é"}\n\n{"b":2}\n{"c":3}');
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const cut of [bytes.subarray(0, 7), bytes.subarray(7, 14), bytes.subarray(14)]) controller.enqueue(cut);
        controller.close();
      },
    });
    const lines: string[] = [];
    for await (const line of ndjsonLines(new Response(body))) lines.push(line);
    expect(lines).to.deep.equal(['{"a":"é"}', '{"b":2}', '{"c":3}']);
  });
});
