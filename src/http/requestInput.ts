import type { Middleware } from 'koa';
import { koaBody } from 'koa-body';
import { z } from 'zod';
import { InvalidJsonError, PayloadTooLargeError, UnsupportedMediaTypeError, ValidationError } from '../platform/errors.ts';
import { parseInput } from '../platform/inputValidation.ts';
import type { RequestState } from './state.ts';

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
 * Parses a JSON body: 415 for any other content type, 400 for malformed JSON, 413 above the limit.
 * The parsed value is on ctx.request.body.
 */
export function jsonBody(limit: string): Middleware<RequestState> {
  const parser = koaBody({
    json: true,
    urlencoded: false,
    text: false,
    multipart: false,
    jsonStrict: false,
    jsonLimit: limit,
    onError: (error) => {
      if ((error as Error & { status?: number }).status === 413) {
        throw new PayloadTooLargeError(`The body exceeds the ${limit} limit.`);
      }
      throw new InvalidJsonError('The body is not valid JSON.');
    },
  });
  return async (ctx, next) => {
    if (!ctx.is('application/json')) {
      throw new UnsupportedMediaTypeError('Send a JSON body with Content-Type: application/json.');
    }
    await parser(ctx, next);
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
