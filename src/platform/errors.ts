/**
 * Named errors that carry their HTTP meaning. The HTTP boundary maps any AppError to its status and
 * body; only errors with `expose` show their message to clients (docs/api.md "Errors").
 */

export interface FieldProblem {
  readonly field: string;
  readonly message: string;
}

export abstract class AppError extends Error {
  abstract readonly status: number;
  abstract readonly code: string;
  readonly expose: boolean = true;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }

  /** Extra members of the JSON error body beside `error` and `message`. */
  bodyExtras(): Record<string, unknown> {
    return {};
  }
}

export class ValidationError extends AppError {
  readonly status = 422;
  readonly code = 'validation_failed';
  readonly details: readonly FieldProblem[];

  constructor(details: readonly FieldProblem[], message = 'The request is invalid.') {
    super(message);
    this.details = details;
  }

  static single(field: string, message: string): ValidationError {
    return new ValidationError([{ field, message }], `${field}: ${message}`);
  }

  override bodyExtras(): Record<string, unknown> {
    return { details: this.details };
  }
}

export class InvalidJsonError extends AppError {
  readonly status = 400;
  readonly code = 'invalid_json';
}

export class UnsupportedMediaTypeError extends AppError {
  readonly status = 415;
  readonly code = 'unsupported_media_type';
}

export class UnauthorizedError extends AppError {
  readonly status = 401;
  readonly code = 'unauthorized';

  constructor(cause?: string) {
    // The cause is for logs only; every 401 body is byte-identical (docs/api.md "Errors").
    super(cause ?? 'unauthorized');
  }
}

export class ForbiddenError extends AppError {
  readonly status = 403;
  readonly code = 'forbidden';
  readonly requiredScope: string | undefined;

  constructor(message: string, requiredScope?: string) {
    super(message);
    this.requiredScope = requiredScope;
  }

  override bodyExtras(): Record<string, unknown> {
    return this.requiredScope ? { required_scope: this.requiredScope } : {};
  }
}

export class NotFoundError extends AppError {
  readonly status = 404;
  readonly code = 'not_found';
}

/** 410: the resource existed and is gone for good (an event past its retention period). */
export class GoneError extends AppError {
  readonly status = 410;
  readonly code: string;
  private readonly extras: Record<string, unknown>;

  constructor(code: string, message: string, extras: Record<string, unknown> = {}) {
    super(message);
    this.code = code;
    this.extras = extras;
  }

  override bodyExtras(): Record<string, unknown> {
    return this.extras;
  }
}

export class ConflictError extends AppError {
  readonly status = 409;
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

export class PayloadTooLargeError extends AppError {
  readonly status = 413;
  readonly code = 'payload_too_large';
}

export class RateLimitedError extends AppError {
  readonly status = 429;
  readonly code = 'rate_limit_exceeded';
  readonly scope: string;
  readonly retryAfterSeconds: number;

  constructor(scope: string, retryAfterSeconds: number) {
    super('Rate limit exceeded.');
    this.scope = scope;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export type LongReadRefusal = 'concurrent_exports' | 'concurrent_live_streams';

/**
 * Too many long reads (exports, live streams) at once: of the caller's tenant, or on this instance
 * (platform/longReadSlots.ts). A 429 like the rate limit's, with its own code: waiting for a running export
 * to end is what helps, not spending less of the key's budget.
 */
export class TooManyLongReadsError extends AppError {
  readonly status = 429;
  /** concurrent_exports for exports; concurrent_live_streams for live streams, which have caps of their own. */
  readonly code: LongReadRefusal;
  readonly perTenant: number;
  readonly retryAfterSeconds: number;

  constructor(message: string, perTenant: number, retryAfterSeconds: number, code: LongReadRefusal = 'concurrent_exports') {
    super(message);
    this.perTenant = perTenant;
    this.retryAfterSeconds = retryAfterSeconds;
    this.code = code;
  }

  override bodyExtras(): Record<string, unknown> {
    return { limit: this.perTenant, retry_after_s: this.retryAfterSeconds };
  }
}

/** A dependency (Postgres, NATS) is unreachable or busy; clients may retry after retryAfterSeconds. */
export class ServiceUnavailableError extends AppError {
  readonly status = 503;
  readonly code = 'service_unavailable';
  readonly retryAfterSeconds = 1;
}

/** Anything thrown that is not an Error becomes one, so logging and mapping can rely on the shape. */
export function coerceError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  const error = new Error(typeof thrown === 'string' ? thrown : `Non-error thrown: ${safeDescribe(thrown)}`);
  error.name = 'NonErrorThrown';
  return error;
}

function safeDescribe(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
