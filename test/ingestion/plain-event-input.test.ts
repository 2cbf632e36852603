import { expect } from 'chai';
import { eventInputSchema, plainEventInput } from '../../src/ingestion/eventInput.ts';

/**
 * The plain path answers for the schema only where the schema accepts, with the schema's own output; on
 * every other input it steps aside. Compared on events producers send and on each field broken in the
 * ways a producer (or an attacker) breaks it.
 */

const base = {
  event_id: '0190b6c8-1c2d-7e3f-8a9b-0c1d2e3f4a5b',
  timestamp: '2026-11-27T10:00:00.123Z',
  tenant_id: 'tenant-1',
  action: 'phi.read',
  user_id: 'user-1',
  user_role: 'clinician',
  resource_type: 'patient_record',
  resource_id: 'p-1',
  fields_accessed: ['diagnosis', 'medications'],
  phi_involved: true,
  source_ip: '10.1.2.3',
  user_agent: 'producer/1.0',
  justification: 'treatment',
  success: true,
  details: { ward: '3', nested: { list: [1, 'two', null, true], empty: {} } },
};

const long = (length: number) => 'x'.repeat(length);
const wrongValues: unknown[] = [
  undefined,
  null,
  0,
  1.5,
  true,
  false,
  '',
  ' ',
  long(129),
  long(257),
  long(1025),
  long(2001),
  [],
  ['a'],
  {},
  { a: 1 },
];

const fieldValues: Record<string, unknown[]> = {
  event_id: ['0190B6C8-1C2D-7E3F-8A9B-0C1D2E3F4A5B', 'not-a-uuid', '0190b6c8-1c2d-7e3f-8a9b-0c1d2e3f4a5'],
  timestamp: [
    '2026-11-27T10:00:00Z',
    '2026-11-27T11:00:00.123456789+01:00',
    '2026-11-27t10:00:00z',
    '2026-11-27 10:00:00Z',
    '2026-02-30T10:00:00Z',
    '2026-11-27T10:00:00',
  ],
  tenant_id: ['t', 'T_9-x', '-t', 'a.b', long(64), long(65)],
  action: ['phi.read', 'a', 'Phi.read', 'phi..read', 'phi.read.', `a.${long(126)}`, `a.${long(127)}`],
  user_id: ['u', long(256), long(257), 'ünïcödé ✓'],
  user_role: ['r', long(256)],
  resource_type: ['t', long(128), long(129)],
  resource_id: ['p', long(256), long(257)],
  fields_accessed: [
    [],
    ['a'],
    [''],
    ['a', 1],
    Array.from({ length: 500 }, () => 'f'),
    Array.from({ length: 501 }, () => 'f'),
    [long(257)],
    'a',
  ],
  phi_involved: [true, false, 'true', 1],
  source_ip: ['', '::1', '2001:db8::1', '10.1.2.256', 'localhost', '10.1.2.3 '],
  user_agent: ['', long(1024), long(1025)],
  justification: ['', long(2000), long(2001)],
  success: [true, false, 'false', 0],
  details: [
    {},
    { a: 1 },
    [],
    ['a'],
    'text',
    { deep: { deeper: { deepest: [1, { x: 'y' }] } } },
    { 2: 'b', 1: 'a', z: 'c' },
    JSON.parse('{"__proto__": {"polluted": true}, "a": 1}'),
    { constructor: 'x' },
    { constructor: { prototype: {} } },
    { big: long(16 * 1024 - 12) },
    { big: long(16 * 1024) },
    { emoji: '😀'.repeat(4000) },
    Object.create(null),
  ],
};

function inputs(): Array<{ name: string; value: unknown }> {
  const cases: Array<{ name: string; value: unknown }> = [{ name: 'a full event', value: structuredClone(base) }];
  for (const [field, values] of Object.entries(fieldValues)) {
    for (const [index, value] of [...values, ...wrongValues].entries()) {
      const event: Record<string, unknown> = structuredClone(base);
      if (value === undefined) delete event[field];
      else event[field] = value;
      cases.push({ name: `${field} #${index}`, value: event });
    }
  }
  const minimal = {
    tenant_id: 't',
    action: 'a.b',
    user_id: 'u',
    user_role: 'r',
    resource_type: 't',
    resource_id: 'p',
    phi_involved: false,
    success: true,
  };
  cases.push(
    { name: 'only the required fields', value: minimal },
    { name: 'phi false with fields accessed', value: { ...minimal, fields_accessed: ['a'] } },
    { name: 'phi false with no fields accessed', value: { ...minimal, fields_accessed: [] } },
    { name: 'event_id without timestamp', value: { ...minimal, event_id: base.event_id } },
    { name: 'timestamp without event_id', value: { ...minimal, timestamp: base.timestamp } },
    { name: 'an unknown field', value: { ...base, extra: 1 } },
    { name: 'a __proto__ field', value: JSON.parse(`{"__proto__": {}, ${JSON.stringify(base).slice(1)}`) },
    { name: 'an array', value: [base] },
    { name: 'null', value: null },
    { name: 'a string', value: 'event' },
    { name: 'an object without a prototype', value: Object.assign(Object.create(null), base) },
  );
  return cases;
}

/** The output with absent and undefined fields alike (the event is built with `??` from either). */
function normalised(output: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(output).filter(([, value]) => value !== undefined));
}

describe('the plain path of event validation', () => {
  const cases = inputs();

  it(`accepts only what the schema accepts, returning the schema's output (${cases.length} inputs)`, () => {
    let accepted = 0;
    for (const { name, value } of cases) {
      const plain = plainEventInput(value);
      if (plain === undefined) continue;
      accepted += 1;
      const parsed = eventInputSchema.safeParse(value);
      expect(parsed.success, `${name}: the schema refuses what the plain path accepted`).to.equal(true);
      expect(normalised(plain), name).to.deep.equal(normalised(parsed.data!));
    }
    // Most cases are broken on purpose; the plain path must still take the valid ones.
    expect(accepted).to.be.greaterThan(50);
  });

  it('answers for the events producers send: every full or minimal event the schema accepts without a special key', () => {
    const plainCases = cases.filter(({ name }) =>
      /^(a full event|only the required fields|timestamp without event_id|phi false with no)/.test(name),
    );
    for (const { name, value } of plainCases) expect(plainEventInput(value), name).not.to.equal(undefined);
  });
});
