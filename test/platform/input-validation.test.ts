import { expect } from 'chai';
import { z } from 'zod';
import { ValidationError } from '../../src/platform/errors.ts';
import { checkInput, parseInput } from '../../src/platform/inputValidation.ts';

const Event = z.strictObject({ action: z.string().min(1), details: z.record(z.string(), z.unknown()).optional() });

/** The details of the 422 parseInput throws. */
function problemsOf(value: unknown, prefix?: string): unknown {
  try {
    parseInput(Event, value, prefix);
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    expect((error as ValidationError).status).to.equal(422);
    return (error as ValidationError).details;
  }
  throw new Error('parseInput accepted the value');
}

describe('the input gate', () => {
  it('returns what the schema parses from clean input', () => {
    expect(parseInput(Event, { action: 'phi.read', details: { ward: '3B' } })).to.deep.equal({
      action: 'phi.read',
      details: { ward: '3B' },
    });
  });

  it('refuses U+0000 anywhere, naming the field under its prefix', () => {
    expect(problemsOf({ action: 'phi.read', details: { note: 'a\u0000b' } }, 'events.3')).to.deep.equal([
      { field: 'events.3.details.note', message: 'must not contain the NUL character (U+0000)' },
    ]);
  });

  it('refuses an unpaired surrogate in a value or in a key', () => {
    expect(problemsOf({ action: '\ud800' })).to.deep.equal([
      { field: 'action', message: 'must not contain an unpaired UTF-16 surrogate (it is not valid Unicode)' },
    ]);
    expect(problemsOf({ action: 'x', details: { 'k\udc00': 1 } })).to.deep.equal([
      { field: 'details', message: 'has a key containing an unpaired UTF-16 surrogate (it is not valid Unicode)' },
    ]);
  });

  it('refuses nesting deeper than 32 levels, naming at most four segments of the path', () => {
    let deep: unknown = 'bottom';
    for (let level = 0; level < 40; level += 1) deep = [deep];
    expect(problemsOf({ action: 'x', details: { deep } })).to.deep.equal([
      { field: 'details.deep.0.0', message: 'nests deeper than 32 levels' },
    ]);
    // A value thousands of levels deep is refused without overflowing the stack.
    let deeper: unknown = {};
    for (let level = 0; level < 100_000; level += 1) deeper = { a: deeper };
    expect(checkInput(Event, deeper).success).to.equal(false);
  });

  it('lists each schema problem with its dotted field, unknown fields one by one', () => {
    expect(problemsOf({ action: '', extra: 1, other: 2 }, 'events.0')).to.deep.equal([
      { field: 'events.0.action', message: 'Too small: expected string to have >=1 characters' },
      { field: 'events.0.extra', message: 'is not a known field' },
      { field: 'events.0.other', message: 'is not a known field' },
    ]);
  });

  it('names the body itself when the problem has no field', () => {
    expect(problemsOf('not an object')).to.deep.equal([{ field: '(body)', message: 'Invalid input: expected object, received string' }]);
  });

  it('takes a plain answer for clean input, and never for input the text checks refuse', () => {
    const plainly = () => ({ action: 'from the fast path' });
    expect(checkInput(Event, { action: 'x' }, undefined, plainly)).to.deep.equal({ success: true, data: { action: 'from the fast path' } });
    expect(checkInput(Event, { action: 'x\u0000' }, undefined, plainly).success).to.equal(false);
    expect(checkInput(Event, { action: '' }, undefined, () => undefined).success).to.equal(false);
  });
});
