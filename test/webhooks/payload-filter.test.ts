import { expect } from 'chai';
import { compilePayloadFilter, payloadFilterProblems, type PayloadFilter } from '../../src/webhooks/payloadFilter.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

/** A delivery body as the event { action: phi.read, details: {...} } would have it, with the members a filter reads. */
const body = {
  type: 'phi.read',
  actor: { user_id: 'svc-billing', user_role: 'service' },
  resource: { type: 'patient_record', id: 'p-9' },
  phi_involved: true,
  success: false,
  details: {
    ward: '3B',
    count: 3,
    nested: { reason: 'chart review', empty: null },
    tags: ['urgent', 'night'],
    'odd key': 'yes',
    quote: 'say "hi"\\n',
  },
};

describe('payload filters', () => {
  describe('problems, each at its place', () => {
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
      [
        'a group with a second member',
        { any: [{ path: 'type', equals: 'a' }], path: 'type' },
        ['(root): a group has only its "any" member'],
      ],
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

  describe('evaluated by Postgres as fan-out evaluates them', () => {
    let db: TestDatabase;
    before(async () => {
      db = await createTestDatabase();
    });
    after(async () => {
      await db?.drop();
    });

    const holds = async (filter: PayloadFilter): Promise<boolean> => {
      expect(payloadFilterProblems(filter)).to.deep.equal([]);
      const { rows } = await db.pool.query(`SELECT jsonb_path_match($1::jsonb, $2::jsonpath, '{}', true) IS TRUE AS holds`, [
        JSON.stringify(body),
        compilePayloadFilter(filter),
      ]);
      return rows[0].holds;
    };

    const cases: Array<[string, PayloadFilter, boolean]> = [
      ['equality of a text', { path: 'details.ward', equals: '3B' }, true],
      ['equality of another text', { path: 'details.ward', equals: '3b' }, false],
      ['equality of a number', { path: 'details.count', equals: 3 }, true],
      ['a number never equals its text', { path: 'details.count', equals: '3' }, false],
      ['equality of a boolean', { path: 'phi_involved', equals: true }, true],
      ['equality with null', { path: 'details.nested.empty', equals: null }, true],
      ['a missing member equals nothing', { path: 'details.missing', equals: null }, false],
      ['in', { path: 'resource.type', in: ['claim', 'patient_record'] }, true],
      ['in, none of them', { path: 'resource.type', in: ['claim', 'upload'] }, false],
      ['in, over an array looked into', { path: 'details.tags', in: ['day', 'night'] }, true],
      ['in, a missing member', { path: 'details.missing', in: [null, 'x'] }, false],
      ['in, numbers and texts apart', { path: 'details.count', in: ['3', 4] }, false],
      ['prefix', { path: 'actor.user_id', prefix: 'svc-' }, true],
      ['prefix that is not', { path: 'actor.user_id', prefix: 'usr-' }, false],
      ['prefix of a number', { path: 'details.count', prefix: '3' }, false],
      ['presence of a nested key', { path: 'details.nested.reason', exists: true }, true],
      ['presence of a null value', { path: 'details.nested.empty', exists: true }, true],
      ['absence', { path: 'details.nested.other', exists: false }, true],
      ['absence of a present key', { path: 'details.ward', exists: false }, false],
      ['an array looked into', { path: 'details.tags', equals: 'night' }, true],
      ['a key with a space', { path: 'details.odd key', equals: 'yes' }, true],
      ['a value with quotes and a backslash', { path: 'details.quote', equals: 'say "hi"\\n' }, true],
      ['the type', { path: 'type', prefix: 'phi.' }, true],
      [
        'all of',
        {
          all: [
            { path: 'details.ward', equals: '3B' },
            { path: 'success', equals: false },
          ],
        },
        true,
      ],
      [
        'all of, one failing',
        {
          all: [
            { path: 'details.ward', equals: '3B' },
            { path: 'success', equals: true },
          ],
        },
        false,
      ],
      [
        'any of',
        {
          any: [
            { path: 'details.ward', equals: '4C' },
            { path: 'resource.id', equals: 'p-9' },
          ],
        },
        true,
      ],
      [
        'any of, none holding',
        {
          any: [
            { path: 'details.ward', equals: '4C' },
            { path: 'resource.id', equals: 'p-1' },
          ],
        },
        false,
      ],
      [
        'nested groups',
        {
          all: [
            {
              any: [
                { path: 'details.ward', in: ['1A', '3B'] },
                { path: 'details.missing', exists: true },
              ],
            },
            { path: 'type', equals: 'phi.read' },
          ],
        },
        true,
      ],
      ['a jsonpath-looking value is a plain text', { path: 'details.ward', equals: '3B" || true || "' }, false],
    ];
    for (const [what, filter, expected] of cases) {
      it(`${expected ? 'holds' : 'does not hold'}: ${what}`, async () => {
        expect(await holds(filter)).to.equal(expected);
      });
    }
  });
});
