import { isIP } from 'node:net';
import { z } from 'zod';
import {
  ACTION_MAX_LENGTH,
  ACTION_PATTERN,
  IDENTIFIER_MAX_LENGTH,
  RESOURCE_TYPE_MAX_LENGTH,
  TENANT_ID_PATTERN,
  UUID_PATTERN,
  parseTimestampCeilMs,
} from '../events/eventFields.ts';
import type { NewEvent } from '../events/eventStore.ts';
import { uuidv7 } from '../events/uuidv7.ts';

const DETAILS_MAX_BYTES = 16 * 1024;
// Clock skew allowance for producer-supplied timestamps; further in the future is a producer bug.
const MAX_FUTURE_SKEW_MS = 5 * 60_000;

const text = (max: number) => z.string().min(1, 'must not be empty').max(max, `must be at most ${max} characters`);

/** One event as a producer sends it (internal ingestion API and JetStream). */
export const eventInputSchema = z
  .strictObject({
    event_id: z.string().regex(UUID_PATTERN, 'must be a UUID').optional(),
    // Parsed once, here: the output is epoch milliseconds.
    timestamp: z
      .string()
      .transform((value, ctx) => {
        const epochMs = parseTimestampCeilMs(value);
        if (epochMs === undefined) ctx.addIssue({ code: 'custom', message: 'must be an RFC 3339 timestamp with Z or an offset' });
        return epochMs ?? z.NEVER;
      })
      .optional(),
    tenant_id: z.string().regex(TENANT_ID_PATTERN, 'must be 1-64 letters, digits, _ or -, starting with a letter or digit'),
    action: text(ACTION_MAX_LENGTH).regex(ACTION_PATTERN, 'must be a dotted lowercase action such as phi.read'),
    user_id: text(IDENTIFIER_MAX_LENGTH),
    user_role: text(IDENTIFIER_MAX_LENGTH),
    resource_type: text(RESOURCE_TYPE_MAX_LENGTH),
    resource_id: text(IDENTIFIER_MAX_LENGTH),
    fields_accessed: z.array(text(IDENTIFIER_MAX_LENGTH)).max(500).optional(),
    phi_involved: z.boolean(),
    source_ip: z.string().refine((value) => value === '' || isIP(value) !== 0, 'must be an IPv4 or IPv6 address').optional(),
    user_agent: z.string().max(1024).optional(),
    justification: z.string().max(2000).optional(),
    success: z.boolean(),
    // Serialised once, here: the output is the stored JSON text.
    details: z
      .record(z.string(), z.unknown())
      .transform((value, ctx) => {
        const text = JSON.stringify(value);
        if (Buffer.byteLength(text) > DETAILS_MAX_BYTES) {
          ctx.addIssue({ code: 'custom', message: `must serialise to at most ${DETAILS_MAX_BYTES} bytes` });
        }
        return text;
      })
      .optional(),
  })
  .superRefine((event, ctx) => {
    if (event.event_id !== undefined && event.timestamp === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['timestamp'],
        message: 'is required with event_id, so that a retried event is recognised as the same event',
      });
    }
    if (event.timestamp !== undefined && event.timestamp > Date.now() + MAX_FUTURE_SKEW_MS) {
      ctx.addIssue({ code: 'custom', path: ['timestamp'], message: 'is more than 5 minutes in the future' });
    }
    if (!event.phi_involved && event.fields_accessed !== undefined && event.fields_accessed.length > 0) {
      ctx.addIssue({ code: 'custom', path: ['fields_accessed'], message: 'is only recorded for PHI events (phi_involved: true)' });
    }
  });

export type EventInput = z.output<typeof eventInputSchema>;

/**
 * Fills what the producer left out: a UUIDv7 and the current time, "" and "{}" for the optional text and
 * JSON fields (DESIGN.md §2 "Event fields").
 */
export function toNewEvent(input: EventInput, now: number = Date.now()): NewEvent {
  const occurredAtMs = input.timestamp ?? now;
  return {
    tenantId: input.tenant_id,
    occurredAtMs,
    eventId: (input.event_id ?? uuidv7(occurredAtMs)).toLowerCase(),
    action: input.action,
    userId: input.user_id,
    userRole: input.user_role,
    resourceType: input.resource_type,
    resourceId: input.resource_id,
    fieldsAccessed: input.phi_involved ? JSON.stringify(input.fields_accessed ?? []) : '',
    phiInvolved: input.phi_involved,
    sourceIp: input.source_ip ?? '',
    userAgent: input.user_agent ?? '',
    justification: input.justification ?? '',
    success: input.success,
    details: input.details ?? '{}',
  };
}
