import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import {
  type AppError,
  coerceError,
  ConflictError,
  ForbiddenError,
  GoneError,
  InvalidJsonError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  ServiceUnavailableError,
  TooManyLongReadsError,
  UnauthorizedError,
  UnsupportedMediaTypeError,
  ValidationError,
} from '../../src/platform/errors.ts';

describe('the named errors', () => {
  const errors: AppError[] = [
    new InvalidJsonError('The body is not valid JSON.'),
    new UnauthorizedError('revoked key'),
    new ForbiddenError('The key lacks audit:export.', 'audit:export'),
    new NotFoundError('No such event.'),
    new ConflictError('managed_by_kubernetes', 'Change it in Kubernetes.'),
    new PayloadTooLargeError('Too large.'),
    new UnsupportedMediaTypeError('Send JSON.'),
    ValidationError.single('limit', 'must be an integer from 1 to 1000'),
    new RateLimitedError('key', 3),
    new TooManyLongReadsError('Too many exports.', 2, 5),
    new TooManyLongReadsError('Too many live streams.', 4, 5, 'concurrent_live_streams'),
    new ServiceUnavailableError('Postgres is away.'),
  ];

  it('each carries a status and code of the table in docs/api.md "Errors"', () => {
    const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const documented = new Set([...doc.matchAll(/^\| (\d{3}) \| `([a-z_]+)` \|/gm)].map((match) => `${match[1]} ${match[2]}`));
    for (const error of errors) expect(documented, `${error.status} ${error.code}`).to.include(`${error.status} ${error.code}`);
  });

  it('are Errors named after their class, exposable to clients unless said otherwise', () => {
    for (const error of errors) {
      expect(error).to.be.instanceOf(Error);
      expect(error.name).to.equal(error.constructor.name);
      expect(error.expose).to.equal(true);
    }
  });

  it('add to the body what the table says: details, required_scope, limit and retry_after_s', () => {
    expect(ValidationError.single('limit', 'must be an integer from 1 to 1000').bodyExtras()).to.deep.equal({
      details: [{ field: 'limit', message: 'must be an integer from 1 to 1000' }],
    });
    expect(new ForbiddenError('No.', 'audit:export').bodyExtras()).to.deep.equal({ required_scope: 'audit:export' });
    expect(new ForbiddenError('Another tenant’s endpoint.').bodyExtras()).to.deep.equal({});
    expect(new TooManyLongReadsError('Too many.', 2, 5).bodyExtras()).to.deep.equal({ limit: 2, retry_after_s: 5 });
    expect(new GoneError('event_expired', 'Past its retention.', { expired_at: '2026-01-01' }).bodyExtras()).to.deep.equal({
      expired_at: '2026-01-01',
    });
  });

  it('name the field in a validation error’s message', () => {
    expect(ValidationError.single('events.3.action', 'is required').message).to.equal('events.3.action: is required');
  });

  it('keep the cause of a 401 for the logs only: its message is the cause, not shown (the body is fixed)', () => {
    expect(new UnauthorizedError('revoked key').message).to.equal('revoked key');
    expect(new UnauthorizedError().message).to.equal('unauthorized');
  });
});

describe('coerceError', () => {
  it('returns an Error as it is', () => {
    const error = new RangeError('out');
    expect(coerceError(error)).to.equal(error);
  });

  it('makes a thrown string the message of a NonErrorThrown', () => {
    const error = coerceError('connection lost');
    expect([error.name, error.message]).to.deep.equal(['NonErrorThrown', 'connection lost']);
  });

  it('describes other values as JSON, or as text when they cannot be', () => {
    expect(coerceError({ code: 57 }).message).to.equal('Non-error thrown: {"code":57}');
    expect(coerceError(undefined).message).to.equal('Non-error thrown: undefined');
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(coerceError(circular).message).to.equal('Non-error thrown: [object Object]');
  });
});
