import { expect } from 'chai';
import { connect } from 'node:net';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startTestService, type TestService } from '../support/service.ts';

interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Sends bytes as they are on a fresh connection and reads the answer until the server closes it. */
function sendRaw(port: number, request: Buffer | string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const [head = '', body = ''] = text.split('\r\n\r\n', 2);
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(
        lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
    });
    // Written without half-closing: a server may drop an answer to a client that already ended its side.
    socket.write(request);
  });
}

describe("requests Node's HTTP parser refuses get the JSON error shape", function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let service: TestService;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({ databaseUrl: db.url, roles: ['api', 'ingest'] });
  });

  after(async () => {
    await service?.stop();
    await db?.drop();
  });

  const cases: Array<[string, Buffer | string, number, string]> = [
    ['a NUL in a header value', 'GET /api/v2/public/audit/events HTTP/1.1\r\nHost: x\r\nX-Note: a\u0000b\r\n\r\n', 400, 'bad_request'],
    [
      'a control character in a header value',
      'GET /api/v2/public/audit/events HTTP/1.1\r\nHost: x\r\nX-Note: a\u0007b\r\n\r\n',
      400,
      'bad_request',
    ],
    ['a space in the path', 'GET /api/v2/public/audit/ev ents HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'bad_request'],
    ['a malformed Content-Length', 'POST /internal/v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n', 400, 'bad_request'],
    ['an unknown method token', 'FOO /api/v2/public/audit/events HTTP/1.1\r\nHost: x\r\n\r\n', 501, 'not_implemented'],
    ['a request line that is not HTTP at all', 'hello there\r\n\r\n', 501, 'not_implemented'],
    ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 501, 'not_implemented'],
    [
      'headers past the size limit',
      `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
      'request_header_fields_too_large',
    ],
  ];

  for (const port of ['public', 'internal'] as const) {
    describe(`on the ${port} port`, () => {
      for (const [what, request, status, code] of cases) {
        it(`answers ${status} ${code} in JSON for ${what}, and closes the connection`, async () => {
          const portNumber = port === 'public' ? service.service.publicPort! : service.service.internalPort;
          const answer = await sendRaw(portNumber, request);
          expect(answer.status).to.equal(status);
          expect(answer.headers['content-type']).to.match(/^application\/json/);
          expect(answer.headers['x-request-id']).to.match(/^[0-9a-f-]{36}$/);
          expect(answer.headers.connection).to.equal('close');
          expect(Number(answer.headers['content-length'])).to.equal(Buffer.byteLength(answer.body));
          const body = JSON.parse(answer.body);
          expect(body.error).to.equal(code);
          expect(body.message)
            .to.be.a('string')
            .and.not.match(/\bat \S+:\d+/);
        });
      }
    });
  }

  it('answers a header value with a 0xFF byte (obs-text, which HTTP allows) like any request: in JSON', async () => {
    const request = Buffer.concat([
      Buffer.from('GET /api/v2/public/audit/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Note: a'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('b\r\n\r\n'),
    ]);
    const answer = await sendRaw(service.service.publicPort!, request);
    expect(answer.status).to.equal(401);
    expect(answer.body).to.equal('{"error":"unauthorized"}');
  });

  it('still serves well-formed requests on the same server afterwards', async () => {
    await sendRaw(service.service.publicPort!, 'FOO / HTTP/1.1\r\nHost: x\r\n\r\n');
    const answer = await sendRaw(
      service.service.publicPort!,
      'GET /api/v2/public/audit/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    expect(answer.status).to.equal(401);
    expect(answer.body).to.equal('{"error":"unauthorized"}');
  });
});
