import { expect } from 'chai';
import { z } from 'zod';
import { ValidationError } from '../../src/platform/errors.ts';
import { checkInput, parseInput } from '../../src/platform/inputValidation.ts';

const schema = z.strictObject({ action: z.string().min(1), details: z.record(z.string(), z.unknown()).optional() });

/** The 422's details of `value` under `prefix`. */
function details(value: unknown, prefix?: string): Array<{ field: string; message: string }> {
  const checked = checkInput(schema, value, prefix);
  expect(checked.success).to.equal(false);
  return checked.success ? [] : [...checked.error.details];
}

/** The one gate every outside input passes (docs/api.md "Errors": a 422 names each field and what is wrong). */
describe('the input gate', () => {
  it('gives the schema’s output for input that passes', () => {
    expect(parseInput(schema, { action: 'phi.read' })).to.deep.equal({ action: 'phi.read' });
  });

  it('names each problem’s field dotted, under the caller’s prefix', () => {
    expect(details({ action: '' }, 'events.3')).to.deep.equal([{ field: 'events.3.action', message: details({ action: '' })[0]!.message }]);
    expect(details({ action: 'a', actoin: 'b' })).to.deep.equal([{ field: 'actoin', message: 'is not a known field' }]);
    expect(details('text')[0]!.field).to.equal('(body)');
  });

  it('refuses NUL characters and unpaired surrogates anywhere, keys included, before the schema', () => {
    expect(details({ action: 'a', details: { note: 'x\u0000y' } })).to.deep.equal([
      { field: 'details.note', message: 'must not contain the NUL character (U+0000)' },
    ]);
    expect(details({ action: 'a', details: { list: ['ok', '\ud800'] } })[0]!.field).to.equal('details.list.1');
    expect(details({ action: 'a', details: { 'k\u0000': 1 } })).to.deep.equal([
      { field: 'details', message: 'has a key containing the NUL character (U+0000)' },
    ]);
  });

  it('refuses nesting deeper than 32 levels, naming only the start of the path', () => {
    let deep: unknown = 'bottom';
    for (let level = 0; level < 40; level += 1) deep = { a: deep };
    const [problem, ...more] = details({ action: 'a', details: deep });
    expect(more).to.deep.equal([]);
    expect(problem).to.deep.equal({ field: 'details.a.a.a', message: 'nests deeper than 32 levels' });
  });

  it('throws the 422 from parseInput', () => {
    expect(() => parseInput(schema, {})).to.throw(ValidationError);
  });
});
