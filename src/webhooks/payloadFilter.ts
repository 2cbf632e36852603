import { z } from 'zod';

/**
 * Payload filters (docs/webhooks.md "Payload filters"): conditions on the members of a delivery's body that
 * an endpoint's events must meet besides its action filter. Checked here, with a message naming the exact
 * place of each problem, and compiled to one SQL/JSON path predicate that fan-out and replays evaluate in
 * Postgres against the body's members (migration 029's audit_webhook_payload), so that what is filtered out
 * never becomes a delivery. Pure: no I/O.
 *
 *   {"path": "details.ward", "equals": "3B"}          {"path": "resource.type", "in": ["claim", "upload"]}
 *   {"path": "actor.user_id", "prefix": "svc-"}       {"path": "details.reason", "exists": true}
 *   {"all": [filter, …]}   {"any": [filter, …]}
 */

type FilterValue = string | number | boolean | null;

type PayloadCondition =
  | { readonly path: string; readonly equals: FilterValue }
  | { readonly path: string; readonly in: readonly FilterValue[] }
  | { readonly path: string; readonly prefix: string }
  | { readonly path: string; readonly exists: boolean };

export type PayloadFilter = PayloadCondition | { readonly all: readonly PayloadFilter[] } | { readonly any: readonly PayloadFilter[] };

/** The members of a delivery's body a filter may name, with the JSON type each holds; `details.…` reaches into details. */
const BODY_FIELDS: Readonly<Record<string, 'string' | 'boolean'>> = {
  type: 'string',
  'actor.user_id': 'string',
  'actor.user_role': 'string',
  'resource.type': 'string',
  'resource.id': 'string',
  phi_involved: 'boolean',
  success: 'boolean',
};
const DETAILS_PREFIX = 'details.';

const PAYLOAD_FILTER_LIMITS = {
  /** Conditions in one filter, however nested. */
  conditions: 50,
  /** Levels of all/any groups. */
  depth: 4,
  /** Members of one group, and values of one `in`. */
  members: 50,
  /** Characters of a path, and of a string value. */
  text: 256,
  /** Keys of a details path after `details.`. */
  detailsKeys: 8,
} as const;

const OPERATORS = ['equals', 'in', 'prefix', 'exists'] as const;
type Operator = (typeof OPERATORS)[number];

/** One problem of a filter: where it is (under the filter), and what is wrong. */
export interface FilterProblem {
  readonly path: ReadonlyArray<string | number>;
  readonly message: string;
}

/** Every problem of `value` as a filter; none means it is one. */
export function payloadFilterProblems(value: unknown): FilterProblem[] {
  const problems: FilterProblem[] = [];
  let conditions = 0;
  const visit = (node: unknown, at: Array<string | number>, depth: number): void => {
    if (node === null || typeof node !== 'object' || Array.isArray(node)) {
      problems.push({
        path: at,
        message: 'must be an object: a condition ({"path", and one of equals, in, prefix, exists}) or {"all"} / {"any"}',
      });
      return;
    }
    const keys = Object.keys(node);
    const group = keys.find((key) => key === 'all' || key === 'any');
    if (group !== undefined) {
      if (keys.length !== 1) {
        problems.push({ path: at, message: `a group has only its "${group}" member` });
        return;
      }
      const members = (node as Record<string, unknown>)[group];
      if (!Array.isArray(members) || members.length === 0 || members.length > PAYLOAD_FILTER_LIMITS.members) {
        problems.push({ path: [...at, group], message: `must be an array of 1 to ${PAYLOAD_FILTER_LIMITS.members} filters` });
        return;
      }
      if (depth >= PAYLOAD_FILTER_LIMITS.depth) {
        problems.push({ path: [...at, group], message: `groups nest at most ${PAYLOAD_FILTER_LIMITS.depth} levels deep` });
        return;
      }
      for (const [index, member] of members.entries()) visit(member, [...at, group, index], depth + 1);
      return;
    }
    conditions += 1;
    problems.push(...conditionProblems(node as Record<string, unknown>, at));
  };
  visit(value, [], 0);
  if (conditions > PAYLOAD_FILTER_LIMITS.conditions) {
    problems.push({ path: [], message: `has ${conditions} conditions; at most ${PAYLOAD_FILTER_LIMITS.conditions} are allowed` });
  }
  return problems;
}

function conditionProblems(node: Record<string, unknown>, at: Array<string | number>): FilterProblem[] {
  const unknown = Object.keys(node).filter((key) => key !== 'path' && !(OPERATORS as readonly string[]).includes(key));
  if (unknown.length > 0) {
    return unknown.map((key) => ({
      path: [...at, key],
      message: 'is not a known member; a condition has path and one of equals, in, prefix, exists',
    }));
  }
  const operators = OPERATORS.filter((operator) => operator in node);
  if (operators.length !== 1) return [{ path: at, message: 'a condition needs exactly one of equals, in, prefix, exists' }];
  const operator = operators[0]!;
  const fieldType = pathProblemOrType(node.path);
  if (typeof fieldType === 'object') return [{ path: [...at, 'path'], message: fieldType.problem }];
  const operand = node[operator];
  const problem = operandProblem(operator, operand, fieldType, node.path as string);
  return problem ? [{ path: [...at, operator], message: problem }] : [];
}

/** The JSON type the path holds ('any' inside details), or why it names nothing a filter can read. */
function pathProblemOrType(path: unknown): 'string' | 'boolean' | 'any' | { problem: string } {
  if (typeof path !== 'string') return { problem: 'must be a string naming a member of the delivery body' };
  if (path.length > PAYLOAD_FILTER_LIMITS.text) return { problem: `must be at most ${PAYLOAD_FILTER_LIMITS.text} characters` };
  const known = BODY_FIELDS[path];
  if (known) return known;
  if (path.startsWith(DETAILS_PREFIX)) {
    const keys = path.slice(DETAILS_PREFIX.length).split('.');
    if (keys.some((key) => key === '')) return { problem: `"${path}" has an empty key: write details.<key>[.<key>…]` };
    if (keys.length > PAYLOAD_FILTER_LIMITS.detailsKeys)
      return { problem: `reaches at most ${PAYLOAD_FILTER_LIMITS.detailsKeys} keys into details` };
    return 'any';
  }
  return { problem: `"${path}" is not a member a filter can read: use ${Object.keys(BODY_FIELDS).join(', ')} or details.<key>[.<key>…]` };
}

function operandProblem(operator: Operator, operand: unknown, fieldType: 'string' | 'boolean' | 'any', path: string): string | undefined {
  switch (operator) {
    case 'equals':
      return valueProblem(operand, fieldType, path);
    case 'in': {
      if (!Array.isArray(operand) || operand.length === 0 || operand.length > PAYLOAD_FILTER_LIMITS.members) {
        return `must be an array of 1 to ${PAYLOAD_FILTER_LIMITS.members} values`;
      }
      for (const [index, value] of operand.entries()) {
        const problem = valueProblem(value, fieldType, path);
        if (problem) return `value ${index} ${problem}`;
      }
      return undefined;
    }
    case 'prefix':
      if (fieldType === 'boolean') return `cannot apply to ${path}, which is true or false`;
      if (typeof operand !== 'string' || operand === '') return 'must be a non-empty string';
      return operand.length > PAYLOAD_FILTER_LIMITS.text ? `must be at most ${PAYLOAD_FILTER_LIMITS.text} characters` : undefined;
    case 'exists':
      if (fieldType !== 'any') return `applies to details.… paths only: ${path} is in every delivery`;
      return typeof operand === 'boolean' ? undefined : 'must be true or false';
  }
}

function valueProblem(value: unknown, fieldType: 'string' | 'boolean' | 'any', path: string): string | undefined {
  if (fieldType === 'string' && typeof value !== 'string') return `must be a string (${path} is one)`;
  if (fieldType === 'boolean' && typeof value !== 'boolean') return `must be true or false (${path} is one)`;
  if (typeof value === 'string')
    return value.length > PAYLOAD_FILTER_LIMITS.text ? `must be at most ${PAYLOAD_FILTER_LIMITS.text} characters` : undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : 'must be a finite number';
  if (typeof value === 'boolean' || value === null) return undefined;
  return 'must be a string, a number, true, false or null (objects and arrays are not compared)';
}

/**
 * The filter as one SQL/JSON path predicate over the body's members, in the default lax mode: a member
 * missing from the body makes a comparison false (and `exists` false), and an array met on the way is looked
 * into, so a condition holds when it holds for one of its elements. Keys are JSON-quoted and values written
 * as JSON literals, both of which the path language reads as JSON does; the input gate has refused NUL and
 * unpaired surrogates, the only texts it would not.
 */
export function compilePayloadFilter(filter: PayloadFilter): string {
  if ('all' in filter) return `(${filter.all.map(compilePayloadFilter).join(' && ')})`;
  if ('any' in filter) return `(${filter.any.map(compilePayloadFilter).join(' || ')})`;
  const member = `$${filter.path
    .split('.')
    .map((key) => `.${JSON.stringify(key)}`)
    .join('')}`;
  if ('equals' in filter) return `(${member} == ${literal(filter.equals)})`;
  // One walk of the path, its items filtered: a chain of ==, one walk each, cost a fan-out to 1,000 endpoints
  // three times as much (BENCHMARKS.md, "Payload filters at fan-out").
  if ('in' in filter) return `exists(${member} ? (${filter.in.map((value) => `@ == ${literal(value)}`).join(' || ')}))`;
  if ('prefix' in filter) return `(${member} starts with ${literal(filter.prefix)})`;
  return filter.exists ? `exists(${member})` : `!(exists(${member}))`;
}

function literal(value: FilterValue): string {
  // A number as JSON writes it is a path literal too, exponent included; -0 and 0 compare equal anyway.
  return JSON.stringify(value);
}

/**
 * The API's `payload_filter`: a filter (null removes one, in a change). Checked by payloadFilterProblems, so
 * each problem's field is its place under `payload_filter`; a value it passes is a PayloadFilter (asPayloadFilter).
 * The OpenAPI document shows the shape (payloadFilterDocumentation).
 */
export const payloadFilterSchema = z
  .unknown()
  .superRefine((value, ctx) => {
    for (const problem of payloadFilterProblems(value)) ctx.addIssue({ code: 'custom', path: [...problem.path], message: problem.message });
  })
  .meta({ id: 'PayloadFilter', ...payloadFilterDocumentation() });

/** A value payloadFilterSchema passed (or null), typed as what it is. */
export function asPayloadFilter(checked: unknown): PayloadFilter | null {
  return checked === undefined || checked === null ? null : (checked as PayloadFilter);
}

/** The filter's shape as JSON Schema, for the OpenAPI document (the checks above are stricter: path names, types, sizes). */
function payloadFilterDocumentation(): Record<string, unknown> {
  const value = { type: ['string', 'number', 'boolean', 'null'] };
  const condition = (operator: Operator, schema: object) => ({
    type: 'object',
    properties: { path: { type: 'string', maxLength: PAYLOAD_FILTER_LIMITS.text }, [operator]: schema },
    required: ['path', operator],
    additionalProperties: false,
  });
  const group = (name: 'all' | 'any') => ({
    type: 'object',
    properties: {
      [name]: {
        type: 'array',
        minItems: 1,
        maxItems: PAYLOAD_FILTER_LIMITS.members,
        items: { $ref: '#/components/schemas/PayloadFilter' },
      },
    },
    required: [name],
    additionalProperties: false,
  });
  return {
    description: `Conditions on the delivery body an event must meet. path: ${Object.keys(BODY_FIELDS).join(', ')} or details.<key>[.<key>…]; at most ${PAYLOAD_FILTER_LIMITS.conditions} conditions, groups ${PAYLOAD_FILTER_LIMITS.depth} deep.`,
    oneOf: [
      condition('equals', value),
      condition('in', { type: 'array', minItems: 1, maxItems: PAYLOAD_FILTER_LIMITS.members, items: value }),
      condition('prefix', { type: 'string', minLength: 1, maxLength: PAYLOAD_FILTER_LIMITS.text }),
      condition('exists', { type: 'boolean' }),
      group('all'),
      group('any'),
    ],
    example: {
      all: [
        { path: 'resource.type', equals: 'patient_record' },
        { path: 'details.ward', in: ['3B', '4C'] },
      ],
    },
  };
}
