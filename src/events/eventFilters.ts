import { z } from 'zod';
import { checkTimeWindow } from '../platform/paging.ts';
import {
  ACTION_MAX_LENGTH,
  ACTION_PATTERN,
  ACTION_PREFIX_PATTERN,
  IDENTIFIER_MAX_LENGTH,
  RESOURCE_TYPE_MAX_LENGTH,
  parseTimestampCeilMs,
} from './eventFields.ts';

/** Filters shared by the list and the export (docs/api.md). Times are epoch milliseconds. */
export interface EventFilters {
  readonly action?: string;
  readonly resourceType?: string;
  readonly phiInvolved?: boolean;
  readonly sinceMs?: number;
  readonly untilMs?: number;
  /** Who acted: the event's user_id, exactly. */
  readonly userId?: string;
  /** What was acted on: the event's resource_id, exactly (with resourceType or without). */
  readonly resourceId?: string;
  /** An action family: `phi` or `phi.` matches `phi` and `phi.read`, as webhook filters do. */
  readonly actionPrefix?: string;
  /** The list's free-text search, lowercased (eventSearch.ts): a substring of the event's id, action, user or resource. */
  readonly search?: string;
}

const timestampText = z
  .string()
  .refine((value) => parseTimestampCeilMs(value) !== undefined, 'must be an RFC 3339 timestamp with Z or an offset')
  .meta({ format: 'date-time', example: '2026-11-01T00:00:00.000Z' });

/**
 * The filters as clients send them in JSON (the export's body); the list's query string takes the same
 * fields, with phi_involved as text (http/routes/events.ts). One zod shape validates requests, types the
 * handlers, documents the API and names the filters a cursor is bound to.
 */
export const filterFieldsSchema = {
  action: z
    .string()
    .max(ACTION_MAX_LENGTH)
    .regex(ACTION_PATTERN, 'must be a dotted lowercase action such as phi.read')
    .meta({ description: 'Exact action value.', example: 'phi.read' }),
  resource_type: z.string().min(1).max(RESOURCE_TYPE_MAX_LENGTH).meta({ description: 'Exact resource type.', example: 'claim' }),
  phi_involved: z.boolean().meta({ description: 'true: only PHI events; false: only non-PHI events.', example: true }),
  since: timestampText.meta({ description: 'Inclusive lower bound (RFC 3339).' }),
  until: timestampText.meta({ description: 'Exclusive upper bound (RFC 3339).' }),
  // After the first release's filters: the canonical form (canonicalFilters) follows this order.
  user_id: z.string().min(1).max(IDENTIFIER_MAX_LENGTH).meta({ description: 'Exact user_id: what this user did.', example: 'user-2291' }),
  resource_id: z
    .string()
    .min(1)
    .max(IDENTIFIER_MAX_LENGTH)
    .meta({ description: 'Exact resource_id, with resource_type or without: who touched this record.', example: 'patient-88120' }),
  action_prefix: z
    .string()
    .max(ACTION_MAX_LENGTH)
    .regex(ACTION_PREFIX_PATTERN, 'must be an action or a family of them, such as phi or phi.')
    .meta({
      description: 'An action family, matched as webhook filters are: `phi.` matches phi.read and phi.export; `phi` those and phi itself.',
      example: 'phi.',
    }),
};

type FilterName = keyof typeof filterFieldsSchema;

export type FilterFields = { [Name in FilterName]?: z.output<(typeof filterFieldsSchema)[Name]> | undefined };

/** The field of EventFilters each filter becomes: a filter added to the schema without one does not compile. */
const EVENT_FILTER_NAMES = {
  action: 'action',
  resource_type: 'resourceType',
  phi_involved: 'phiInvolved',
  since: 'sinceMs',
  until: 'untilMs',
  user_id: 'userId',
  resource_id: 'resourceId',
  action_prefix: 'actionPrefix',
} as const satisfies { readonly [Name in FilterName]: keyof EventFilters };

export function toEventFilters(fields: FilterFields): EventFilters {
  const filters: { -readonly [K in keyof EventFilters]: EventFilters[K] } = {};
  if (fields.action !== undefined) filters.action = fields.action;
  if (fields.resource_type !== undefined) filters.resourceType = fields.resource_type;
  if (fields.phi_involved !== undefined) filters.phiInvolved = fields.phi_involved;
  if (fields.since !== undefined) filters.sinceMs = parseTimestampCeilMs(fields.since);
  if (fields.until !== undefined) filters.untilMs = parseTimestampCeilMs(fields.until);
  if (fields.user_id !== undefined) filters.userId = fields.user_id;
  if (fields.resource_id !== undefined) filters.resourceId = fields.resource_id;
  if (fields.action_prefix !== undefined) filters.actionPrefix = fields.action_prefix;
  checkTimeWindow(filters.sinceMs, filters.untilMs);
  return filters;
}

/** Every filter of the schema, in the schema's order, as named in EventFilters; then the list's own search. */
const CANONICAL_ORDER: ReadonlyArray<keyof EventFilters> = [
  ...(Object.keys(filterFieldsSchema) as FilterName[]).map((name) => EVENT_FILTER_NAMES[name]),
  'search',
];

/** The filters of the first release: their places in the canonical form are always written. */
const FIRST_RELEASE_FILTERS = 5;

/**
 * Stable text form of the filters; the cursor is bound to it. Every filter of the schema has its place, so
 * a new one cannot be left out; later filters are appended and written only up to the last one given, so
 * that the text of a query without them stays what it was before they existed: cursors in flight survive
 * the deploy that adds a filter (docs/api.md "Versioning" promises only a cursor's opacity, but a walk
 * broken by an upgrade is a walk to start again). Positions never move, so two different sets of filters
 * never share a text.
 */
export function canonicalFilters(filters: EventFilters): string {
  const values: unknown[] = CANONICAL_ORDER.map((name) => filters[name] ?? null);
  while (values.length > FIRST_RELEASE_FILTERS && values.at(-1) === null) values.pop();
  return JSON.stringify(values);
}
