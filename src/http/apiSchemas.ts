import { z } from 'zod';
import { AUDIT_EVENT_FIELDS, type AuditEventField, type AuditEventFieldName } from '../client/auditEvent.ts';

/**
 * Response shapes of the public API, for the OpenAPI document and for tests that check real responses
 * against it. Requests are validated by the schemas next to their routes.
 */

// Response objects are loose: the service may add fields (docs/api.md "Versioning"), and clients must ignore unknown ones.
export const redactionSchema = z
  .object({
    fields: z
      .array(z.string())
      .meta({ description: 'Every field redacted so far: `justification` or `details.<key>`; each now holds "[redacted]".' }),
    leaf_hash: z.string().meta({
      description:
        "The event's leaf hash as sealed (lowercase hex): its inclusion proof proves it; the redacted content no longer hashes to it.",
    }),
    history: z
      .array(
        z.object({
          fields: z.array(z.string()),
          redacted_at: z.string().meta({ description: 'UTC, YYYY-MM-DDTHH:mm:ss.SSSZ.' }),
          reference: z.string().meta({ description: 'The reference of the erasure request it honoured.' }),
        }),
      )
      .meta({ description: 'Each redaction of the event, oldest first.' }),
  })
  .meta({
    id: 'Redaction',
    description:
      'Present only on a redacted event: personal data in free-text fields was replaced by "[redacted]" on request. Its position and leaf stay proven; its content is not re-verifiable.',
  });

export const auditEventSchema = z
  .looseObject({ ...auditEventShape(), redaction: redactionSchema.optional() })
  .meta({ id: 'AuditEvent', description: 'One audit event. Clients must tolerate additional fields.' });

type FieldSchema<Field extends AuditEventField> = Field['type'] extends 'boolean' ? z.ZodBoolean : z.ZodString;
type AuditEventShape = { [Name in AuditEventFieldName]: FieldSchema<(typeof AUDIT_EVENT_FIELDS)[Name]> };

/** The zod fields of the event, one per entry of the client's field table and in its order. */
function auditEventShape(): AuditEventShape {
  const fields = Object.entries(AUDIT_EVENT_FIELDS).map(([name, field]: [string, AuditEventField]) => {
    const { type, ...meta } = field;
    return [name, (type === 'boolean' ? z.boolean() : z.string()).meta(meta)];
  });
  return Object.fromEntries(fields) as AuditEventShape;
}

export const pageSchema = z
  .looseObject({
    limit: z.int(),
    returned: z.int(),
    next_cursor: z.string().nullable().meta({ description: 'Opaque; null on the last page.' }),
    has_more: z.boolean(),
    searched_to: z.string().optional().meta({
      format: 'date-time',
      description:
        'A search (q) only, when its walk stopped before the end of the window: events older than this were not searched yet; next_cursor searches on.',
    }),
  })
  .meta({ id: 'Page' });

export const eventListSchema = z.looseObject({ events: z.array(auditEventSchema), page: pageSchema }).meta({ id: 'EventList' });

export const errorSchema = z
  .looseObject({
    error: z.string().meta({ description: 'Machine-readable code.' }),
    message: z.string().optional(),
    details: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
    required_scope: z.string().optional(),
    request_id: z.string().optional(),
  })
  .meta({ id: 'Error' });

export const rateLimitedSchema = z
  .looseObject({
    error: z.literal('rate_limit_exceeded'),
    scope: z.string().meta({ description: 'The bucket: read, write or auth.' }),
    retry_after_s: z.int(),
  })
  .meta({ id: 'RateLimited' });
