import type { IncomingMessage } from 'node:http';
import { PassThrough, type Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Middleware } from 'koa';
import getRawBody from 'raw-body';
import { z } from 'zod';
import {
  type FieldProblem,
  InvalidJsonError,
  PayloadTooLargeError,
  UnsupportedMediaTypeError,
  ValidationError,
} from '../platform/errors.ts';
import { parseInput } from '../platform/inputValidation.ts';
import { parseUtf8Json } from '../platform/utf8Json.ts';
import type { RequestState } from './state.ts';

declare module 'koa' {
  interface Request {
    /** The parsed JSON body (jsonBody), '' for an empty one; undefined when no body was read. */
    body?: unknown;
  }
}

/**
 * Validates a query string against a strict schema. Unknown parameters and repeated single-valued ones are
 * 422: in an audit trail a silently ignored filter is a wrong answer (docs/api.md).
 */
export function parseQuery<S extends z.ZodType>(schema: S, query: Record<string, string | string[] | undefined>): z.output<S> {
  const repeated = Object.entries(query).filter(([, value]) => Array.isArray(value));
  if (repeated.length > 0) {
    throw new ValidationError(
      repeated.map(([name]) => ({ field: name, message: 'must be given at most once' })),
      `Repeated query parameters: ${repeated.map(([name]) => name).join(', ')}`,
    );
  }
  return parseInput(schema, { ...query });
}

/**
 * 422 for a query string that does not decode to UTF-8 text (`?action=%FF`), naming the parameter: the
 * query parser would have decoded it to U+FFFD without a word, and a filter for something nobody asked
 * for is a wrong answer. Mounted once per app, before any route reads ctx.query.
 */
export function utf8QueryString(): Middleware<RequestState> {
  return async (ctx, next) => {
    const problems = undecodableParameters(ctx.querystring);
    if (problems.length > 0)
      throw new ValidationError(problems, problems.map((problem) => `${problem.field}: ${problem.message}`).join('; '));
    await next();
  };
}

function undecodableParameters(querystring: string): FieldProblem[] {
  const problems: FieldProblem[] = [];
  for (const pair of querystring.split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const [rawName, rawValue] = equals < 0 ? [pair, ''] : [pair.slice(0, equals), pair.slice(equals + 1)];
    const name = strictDecode(rawName);
    if (name === undefined) {
      problems.push({ field: '(query)', message: 'has a parameter name that is not percent-encoded UTF-8 text' });
    } else if (strictDecode(rawValue) === undefined) {
      problems.push({ field: name, message: 'must be percent-encoded UTF-8 text' });
    }
  }
  return problems;
}

/** application/x-www-form-urlencoded decoding that fails rather than substitutes; raw non-ASCII fails too. */
function strictDecode(text: string): string | undefined {
  if (/[^\x20-\x7e]/.test(text)) return undefined;
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}

/**
 * A query parameter that is an integer to clients and handlers. The text must be decimal digits and
 * nothing else (no sign, exponent or spaces, which Number() would accept) before it becomes a number.
 */
export function queryInteger(min: number, max: number) {
  const message = `must be an integer from ${min} to ${max}`;
  const digits = new RegExp(`^\\d{1,${String(max).length}}$`);
  return z.codec(z.string().regex(digits, message), z.int().min(min, message).max(max, message), { decode: Number, encode: String });
}

/** A query parameter that is a boolean to clients and handlers: exactly `true` or `false` on the wire. */
export function queryBoolean() {
  return z.codec(z.enum(['true', 'false'], { message: 'must be true or false' }), z.boolean(), {
    decode: (text) => text === 'true',
    encode: (value) => (value ? 'true' : 'false'),
  });
}

/** Validates a parsed JSON body against a strict schema. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  return parseInput(schema, body);
}

/**
 * Parses a JSON body: 415 for any other content type, 400 for malformed JSON, 413 above the limit, 422
 * naming the field for bytes that are not UTF-8 (platform/utf8Json.ts: a decoder would have replaced them
 * with U+FFFD without a word). The body is read as bytes, inflated when it is gzip, deflate or br, and
 * checked before it is decoded. The parsed value (or '' for an empty body) is on ctx.request.body.
 */
export function jsonBody(limit: string): Middleware<RequestState> {
  return async (ctx, next) => {
    if (!ctx.is('application/json')) {
      throw new UnsupportedMediaTypeError('Send a JSON body with Content-Type: application/json.');
    }
    const bytes = await readBody(ctx.req, ctx.get('Content-Encoding'), ctx.get('Content-Length'), limit);
    ctx.request.body = bytes.length === 0 ? '' : parseUtf8Json(bytes);
    await next();
  };
}

/** The body's bytes, at most `limit` of them once inflated. */
async function readBody(request: IncomingMessage, encoding: string, length: string, limit: string): Promise<Buffer> {
  const coding = encoding.trim().toLowerCase() || 'identity';
  const inflate = INFLATERS[coding];
  if (!inflate) throw new UnsupportedMediaTypeError(`Content-Encoding ${coding} is not supported; send identity, gzip, deflate or br.`);
  const stream = coding === 'identity' ? request : request.pipe(inflate());
  try {
    // The declared length is the encoded one: it can only be checked when nothing is inflated.
    const body: Promise<Buffer> = getRawBody(stream, { limit, length: coding === 'identity' && length !== '' ? length : undefined });
    return await body;
  } catch (error) {
    if ((error as { type?: string }).type === 'entity.too.large') throw new PayloadTooLargeError(`The body exceeds the ${limit} limit.`);
    throw new InvalidJsonError('The body is not valid JSON.');
  }
}

const INFLATERS: Record<string, (() => Transform) | undefined> = {
  identity: () => new PassThrough(),
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/**
 * A text/plain body (a signed note), at most `limit` bytes: 415 for any other content type, 422 for bytes that
 * are not UTF-8. The text is on ctx.request.body.
 */
export function textBody(limit: string): Middleware<RequestState> {
  return async (ctx, next) => {
    if (!ctx.is('text/plain')) throw new UnsupportedMediaTypeError('Send the note as Content-Type: text/plain; charset=utf-8.');
    const bytes = await readBody(ctx.req, ctx.get('Content-Encoding'), ctx.get('Content-Length'), limit);
    try {
      ctx.request.body = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw ValidationError.single('body', 'is not UTF-8');
    }
    await next();
  };
}

/**
 * A JSON body that may be left out: without one (no Transfer-Encoding, and no Content-Length or
 * Content-Length: 0) ctx.request.body is undefined; with one, the rules of jsonBody apply.
 */
export function optionalJsonBody(limit: string): Middleware<RequestState> {
  const parse = jsonBody(limit);
  return async (ctx, next) => {
    // Content-Length: 0 is what clients send for a POST without a body (koa's is() counts it as a body).
    const length = ctx.get('Content-Length');
    if (!ctx.get('Transfer-Encoding') && (length === '' || length === '0')) {
      ctx.request.body = undefined;
      return next();
    }
    return parse(ctx, next);
  };
}
