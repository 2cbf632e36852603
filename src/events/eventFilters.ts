import { z } from 'zod';
import { ValidationError } from '../platform/errors.ts';
import { ACTION_MAX_LENGTH, ACTION_PATTERN, RESOURCE_TYPE_MAX_LENGTH, parseTimestampCeilMs } from './eventFields.ts';

/** Filters shared by the list and the export (docs/api.md). Times are epoch milliseconds. */
export interface EventFilters {
  readonly action?: string;
  readonly resourceType?: string;
  readonly phiInvolved?: boolean;
  readonly sinceMs?: number;
  readonly untilMs?: number;
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
} as const satisfies { readonly [Name in FilterName]: keyof EventFilters };

export function toEventFilters(fields: FilterFields): EventFilters {
  const filters: { -readonly [K in keyof EventFilters]: EventFilters[K] } = {};
  if (fields.action !== undefined) filters.action = fields.action;
  if (fields.resource_type !== undefined) filters.resourceType = fields.resource_type;
  if (fields.phi_involved !== undefined) filters.phiInvolved = fields.phi_involved;
  if (fields.since !== undefined) filters.sinceMs = parseTimestampCeilMs(fields.since);
  if (fields.until !== undefined) filters.untilMs = parseTimestampCeilMs(fields.until);
  if (filters.sinceMs !== undefined && filters.untilMs !== undefined && filters.sinceMs >= filters.untilMs) {
    throw ValidationError.single('since', 'must be earlier than until');
  }
  return filters;
}

/** Every filter of the schema, in the schema's order, as named in EventFilters. */
const CANONICAL_ORDER = (Object.keys(filterFieldsSchema) as FilterName[]).map((name) => EVENT_FILTER_NAMES[name]);

/**
 * Stable text form of the filters; the cursor is bound to it. Every filter of the schema has its place, so
 * a new one cannot be left out; it is appended, and then every cursor issued before invalidates once
 * (docs/api.md "Versioning": only a cursor's opacity is promised). Today's filters keep the text they
 * had, so cursors survive a deploy that adds none.
 */
export function canonicalFilters(filters: EventFilters): string {
  return JSON.stringify(CANONICAL_ORDER.map((name) => filters[name] ?? null));
}
