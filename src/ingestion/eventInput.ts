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
import { ValidationError } from '../platform/errors.ts';
import { checkInput } from '../platform/inputValidation.ts';
import { systemClock } from '../platform/clock.ts';

const DETAILS_MAX_BYTES = 16 * 1024;
const FIELDS_ACCESSED_MAX = 500;
const USER_AGENT_MAX_LENGTH = 1024;
const JUSTIFICATION_MAX_LENGTH = 2000;
export const MAX_BATCH_SIZE = 1000;

/**
 * Which event times producers may write. Every month an event falls in is a partition of the events
 * table, and each partition costs every list query planning time, so a producer must not be able to create
 * them at will (one batch of 500 made-up dates once doubled list latency for every tenant). Older history
 * comes in through the operator's `audit-trail import --allow-old`.
 */
export interface EventTimeWindow {
  /** How far in the past a producer-supplied timestamp may lie; Infinity for an operator's backfill. */
  readonly maxAgeMs: number;
  /** Clock skew allowance; further in the future is a producer bug. */
  readonly maxFutureSkewMs: number;
}

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
    fields_accessed: z.array(text(IDENTIFIER_MAX_LENGTH)).max(FIELDS_ACCESSED_MAX).optional(),
    phi_involved: z.boolean(),
    source_ip: z
      .string()
      .refine((value) => value === '' || isIP(value) !== 0, 'must be an IPv4 or IPv6 address')
      .optional(),
    user_agent: z.string().max(USER_AGENT_MAX_LENGTH).optional(),
    justification: z.string().max(JUSTIFICATION_MAX_LENGTH).optional(),
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
    if (!event.phi_involved && event.fields_accessed !== undefined && event.fields_accessed.length > 0) {
      ctx.addIssue({ code: 'custom', path: ['fields_accessed'], message: 'is only recorded for PHI events (phi_involved: true)' });
    }
  });

type EventInput = z.output<typeof eventInputSchema>;

const EVENT_FIELDS = new Set(Object.keys(eventInputSchema.shape));

const isText = (value: unknown, max: number): value is string => typeof value === 'string' && value.length >= 1 && value.length <= max;
const isOptionalText = (value: unknown, max: number) => value === undefined || (typeof value === 'string' && value.length <= max);

/**
 * eventInputSchema's output for an event it plainly accepts, checked by hand: zod took about 6.5 µs per event,
 * a fifth of the ingest process's CPU per JetStream message, and this about 3 (BENCHMARKS.md, "JetStream
 * ingest against HTTP"). Anything less plain (a missing or mistyped field, an unknown key, details that are
 * not a plain object) returns undefined, and the schema decides and words the problems; so this accepts
 * nothing the schema refuses, and what it returns is what the schema would return
 * (test/ingestion/plain-event-input.test.ts compares the two). A change to the schema changes this too.
 */
export function plainEventInput(value: unknown): EventInput | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  for (const key in value) if (!EVENT_FIELDS.has(key)) return undefined;
  const input = value as Record<string, unknown>;
  const { event_id, timestamp, tenant_id, action, fields_accessed, phi_involved, source_ip, success, details } = input;
  if (event_id !== undefined && (typeof event_id !== 'string' || !UUID_PATTERN.test(event_id) || timestamp === undefined)) return undefined;
  const timestampMs = typeof timestamp === 'string' ? parseTimestampCeilMs(timestamp) : undefined;
  if (timestamp !== undefined && timestampMs === undefined) return undefined;
  if (typeof tenant_id !== 'string' || !TENANT_ID_PATTERN.test(tenant_id)) return undefined;
  if (!isText(action, ACTION_MAX_LENGTH) || !ACTION_PATTERN.test(action)) return undefined;
  const { user_id, user_role, resource_type, resource_id, user_agent, justification } = input;
  if (!isText(user_id, IDENTIFIER_MAX_LENGTH) || !isText(user_role, IDENTIFIER_MAX_LENGTH)) return undefined;
  if (!isText(resource_type, RESOURCE_TYPE_MAX_LENGTH) || !isText(resource_id, IDENTIFIER_MAX_LENGTH)) return undefined;
  if (typeof phi_involved !== 'boolean' || typeof success !== 'boolean') return undefined;
  if (fields_accessed !== undefined && !plainFieldsAccessed(fields_accessed, phi_involved)) return undefined;
  if (source_ip !== undefined && (typeof source_ip !== 'string' || (source_ip !== '' && isIP(source_ip) === 0))) return undefined;
  if (!isOptionalText(user_agent, USER_AGENT_MAX_LENGTH) || !isOptionalText(justification, JUSTIFICATION_MAX_LENGTH)) return undefined;
  const detailsText = details === undefined ? undefined : plainDetailsText(details);
  if (details !== undefined && detailsText === undefined) return undefined;
  return {
    event_id,
    timestamp: timestampMs,
    tenant_id,
    action,
    user_id,
    user_role,
    resource_type,
    resource_id,
    fields_accessed: fields_accessed as string[] | undefined,
    phi_involved,
    source_ip: source_ip as string | undefined,
    user_agent: user_agent as string | undefined,
    justification: justification as string | undefined,
    success,
    details: detailsText,
  };
}

function plainFieldsAccessed(value: unknown, phiInvolved: boolean): boolean {
  if (!Array.isArray(value) || value.length > FIELDS_ACCESSED_MAX || (!phiInvolved && value.length > 0)) return false;
  return value.every((field) => isText(field, IDENTIFIER_MAX_LENGTH));
}

/**
 * The stored text of details that are a plain JSON object the record schema copies key for key; undefined
 * for anything it might treat otherwise (a `__proto__` key, which it drops; a `constructor` key, which its
 * plain-object test reads) or that is too long.
 */
function plainDetailsText(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype) return undefined;
  if (Object.hasOwn(value, '__proto__') || Object.hasOwn(value, 'constructor')) return undefined;
  const text = JSON.stringify(value);
  return Buffer.byteLength(text) <= DETAILS_MAX_BYTES ? text : undefined;
}

/**
 * One producer event, validated; `now` is what a missing timestamp becomes and what the window is
 * measured from. A ValidationError's fields are under `prefix` (`events.3.action`).
 */
export function parseEvent(item: unknown, window: EventTimeWindow, now: number, prefix?: string): NewEvent {
  const parsed = checkInput(eventInputSchema, item, prefix, plainEventInput);
  if (!parsed.success) throw parsed.error;
  const timestamp = parsed.data.timestamp;
  if (timestamp !== undefined) {
    const field = prefix === undefined ? 'timestamp' : `${prefix}.timestamp`;
    if (timestamp > now + window.maxFutureSkewMs) {
      throw ValidationError.single(field, `is more than ${describeDuration(window.maxFutureSkewMs)} in the future`);
    }
    if (timestamp < now - window.maxAgeMs) {
      throw ValidationError.single(
        field,
        `is more than ${describeDuration(window.maxAgeMs)} in the past; older history is imported by an operator (audit-trail import --allow-old)`,
      );
    }
  }
  return toNewEvent(parsed.data, now);
}

/**
 * Validates every item of a batch; any invalid item rejects the whole batch with per-item errors
 * (`events.3.action`), so that nothing of it is stored.
 */
export function parseEventBatch(items: readonly unknown[], window: EventTimeWindow, fieldPrefix = 'events'): NewEvent[] {
  if (items.length > MAX_BATCH_SIZE) {
    throw ValidationError.single(fieldPrefix, `must hold at most ${MAX_BATCH_SIZE} events`);
  }
  const now = systemClock.now();
  const problems: ValidationError[] = [];
  const events: NewEvent[] = [];
  items.forEach((item, index) => {
    try {
      events.push(parseEvent(item, window, now, `${fieldPrefix}.${index}`));
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      problems.push(error);
    }
  });
  if (problems.length > 0) {
    const details = problems.flatMap((problem) => problem.details);
    throw new ValidationError(details, `${problems.length} of ${items.length} events are invalid; none were stored`);
  }
  return events;
}

/** 400 days, 5 minutes: durations as the messages above word them. */
function describeDuration(ms: number): string {
  const units: Array<[number, string]> = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
    [1000, 'second'],
  ];
  for (const [size, name] of units) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${name}${ms === size ? '' : 's'}`;
  }
  return `${ms} ms`;
}

/**
 * Fills what the producer left out: a UUIDv7 and the current time, "" and "{}" for the optional text and
 * JSON fields (docs/api.md "Events").
 */
function toNewEvent(input: EventInput, now: number = systemClock.now()): NewEvent {
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
