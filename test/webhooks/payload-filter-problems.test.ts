import { expect } from 'chai';
import { payloadFilterProblems } from '../../src/webhooks/payloadFilter.ts';

/** What a registration with a bad payload filter is told (422), checked before anything is stored. */
describe('payload filters: problems, each at its place', () => {
  const cases: Array<[string, unknown, string[]]> = [
    ['a condition on an unknown member', { path: 'actor.name', equals: 'x' }, ['path: "actor.name" is not a member a filter can read']],
    ['two operators', { path: 'type', equals: 'a', prefix: 'b' }, ['(root): a condition needs exactly one of']],
    ['no operator', { path: 'type' }, ['(root): a condition needs exactly one of']],
    ['an unknown member of a condition', { path: 'type', equals: 'a', negate: true }, ['negate: is not a known member']],
    ['a number compared with a text field', { path: 'resource.id', equals: 7 }, ['equals: must be a string (resource.id is one)']],
    ['a text compared with a boolean field', { path: 'phi_involved', in: ['true'] }, ['in: value 0 must be true or false']],
    ['a prefix of a boolean', { path: 'success', prefix: 't' }, ['prefix: cannot apply to success']],
    ['exists on a member every body has', { path: 'type', exists: true }, ['exists: applies to details.… paths only']],
    ['an object compared', { path: 'details.a', equals: { b: 1 } }, ['equals: must be a string, a number, true, false or null']],
    ['an empty details key', { path: 'details..a', exists: true }, ['path: "details..a" has an empty key']],
    ['details itself', { path: 'details', exists: true }, ['path: "details" is not a member a filter can read']],
    ['an empty group', { all: [] }, ['all: must be an array of 1 to 50 filters']],
    ['a group with a second member', { any: [{ path: 'type', equals: 'a' }], path: 'type' }, ['(root): a group has only its "any" member']],
    [
      'a nested problem',
      {
        all: [
          { path: 'type', equals: 'a' },
          {
            any: [
              { path: 'resource.type', equals: 'x' },
              { path: 'actor.nme', equals: 'y' },
            ],
          },
        ],
      },
      ['all.1.any.1.path: "actor.nme" is not a member'],
    ],
    [
      'groups five deep',
      { all: [{ all: [{ all: [{ all: [{ all: [{ path: 'type', equals: 'a' }] }] }] }] }] },
      ['all.0.all.0.all.0.all: groups nest at most 4'],
    ],
    ['not an object', ['type'], ['(root): must be an object']],
  ];
  for (const [what, filter, expected] of cases) {
    it(`refuses ${what}`, () => {
      const problems = payloadFilterProblems(filter).map((problem) => `${problem.path.join('.') || '(root)'}: ${problem.message}`);
      expect(problems).to.have.length(expected.length);
      for (const [index, start] of expected.entries()) expect(problems[index]).to.include(start);
    });
  }

  it('refuses more than 50 conditions in all', () => {
    const many = { any: Array.from({ length: 2 }, () => ({ all: Array.from({ length: 26 }, () => ({ path: 'type', equals: 'a' })) })) };
    expect(payloadFilterProblems(many).map((problem) => problem.message)).to.deep.equal(['has 52 conditions; at most 50 are allowed']);
  });
});
