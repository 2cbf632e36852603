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
 * The filter fields as clients send them (query string or JSON body). One zod schema validates requests,
 * types the handlers and documents the API.
 */
export const filterFieldsSchema = {
  action: z
    .string()
    .max(ACTION_MAX_LENGTH)
    .regex(ACTION_PATTERN, 'must be a dotted lowercase action such as phi.read')
    .meta({ description: 'Exact action value.', example: 'phi.read' }),
  resource_type: z
    .string()
    .min(1)
    .max(RESOURCE_TYPE_MAX_LENGTH)
    .meta({ description: 'Exact resource type.', example: 'claim' }),
  since: timestampText.meta({ description: 'Inclusive lower bound (RFC 3339).' }),
  until: timestampText.meta({ description: 'Exclusive upper bound (RFC 3339).' }),
};

export type FilterFields = {
  action?: string | undefined;
  resource_type?: string | undefined;
  phi_involved?: boolean | undefined;
  since?: string | undefined;
  until?: string | undefined;
};

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

/** Stable text form of the filters; the cursor is bound to it. */
export function canonicalFilters(filters: EventFilters): string {
  return JSON.stringify([
    filters.action ?? null,
    filters.resourceType ?? null,
    filters.phiInvolved ?? null,
    filters.sinceMs ?? null,
    filters.untilMs ?? null,
  ]);
}
