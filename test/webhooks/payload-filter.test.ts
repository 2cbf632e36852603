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
