import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * What no Koa app sees: requests Node's HTTP parser refuses (a NUL or 0xFF in a header value, a space in
 * the path, a method token it does not know such as FOO, headers past the size limit) and CONNECT, which
 * Node hands to a 'connect' listener or, without one, answers by closing the connection. Both get the JSON
 * error shape every other answer of the service has (docs/api.md "Errors"), with an X-Request-Id, and the
 * connection is closed after it: a parser that lost its place cannot be trusted with the next request.
 */

interface ParserError extends Error {
  readonly code?: string;
  /** The parser's own words for what was wrong ("Invalid header value char"), fixed texts of llhttp. */
  readonly reason?: string;
}

interface ParserAnswer {
  readonly status: number;
  readonly code: string;
  readonly message: string;
}

function answerFor(error: ParserError): ParserAnswer {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'request_header_fields_too_large', message: 'The request headers are too large.' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'request_timeout', message: 'The request did not arrive in time.' };
    case 'HPE_INVALID_METHOD':
      // As for a method token the parser knows but the service does not (errorBoundary): 501.
      return { status: 501, code: 'not_implemented', message: 'The request method is not supported.' };
    default:
      return {
        status: 400,
        code: 'bad_request',
        message: `The request is not valid HTTP/1.1${error.reason ? ` (${error.reason.replace(/[^\x20-\x7e]/g, '')})` : ''}.`,
      };
  }
}

/** The response as bytes: nothing but ASCII headers and a JSON body. */
function rawResponse(answer: ParserAnswer, extraHeaders = ''): string {
  const requestId = randomUUID();
  const body = JSON.stringify({ error: answer.code, message: answer.message });
  return (
    `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    `X-Request-Id: ${requestId}\r\n` +
    extraHeaders +
    'Connection: close\r\n\r\n' +
    body
  );
}

/**
 * The server's 'clientError' listener. As Node's default does, it answers only a socket that can still
 * carry a response and has not begun one (a parse error after a response started, or a reset, just
 * closes it).
 */
export function answerParserError(error: Error, socket: Duplex): void {
  // The response of a request already being served on this connection, if any (Node keeps it there).
  const current = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
  if ((error as ParserError).code === 'ECONNRESET' || !socket.writable || current?.headersSent) {
    socket.destroy();
    return;
  }
  socket.end(rawResponse(answerFor(error)));
}

/** The server's 'connect' listener: the service is no proxy. */
export function answerConnect(_request: IncomingMessage, socket: Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(
    rawResponse({ status: 501, code: 'not_implemented', message: 'The method CONNECT is not supported: this service is not a proxy.' }),
  );
}
