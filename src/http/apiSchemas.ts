import { z } from 'zod';

/**
 * Response shapes of the public API, for the OpenAPI document and for tests that check real responses
 * against it. Requests are validated by the schemas next to their routes.
 */

// Response objects are loose: the service may add fields (docs/api.md "Versioning"), and clients must ignore unknown ones.
export const auditEventSchema = z
  .looseObject({
    event_id: z.string().meta({ format: 'uuid' }),
    timestamp: z.string().meta({ format: 'date-time', description: 'UTC, millisecond precision.' }),
    action: z.string().meta({ example: 'phi.read' }),
    user_id: z.string(),
    user_role: z.string(),
    resource_type: z.string(),
    resource_id: z.string(),
    fields_accessed: z.string().meta({ description: 'A JSON array in a string; "" for non-PHI events.' }),
    phi_involved: z.boolean(),
    tenant_id: z.string(),
    source_ip: z.string(),
    user_agent: z.string(),
    justification: z.string(),
    success: z.boolean(),
    details: z.string().meta({ description: 'A JSON object in a string; "{}" when empty.' }),
  })
  .meta({ id: 'AuditEvent', description: 'One audit event. Clients must tolerate additional fields.' });

export const pageSchema = z
  .looseObject({
    limit: z.int(),
    returned: z.int(),
    next_cursor: z.string().nullable().meta({ description: 'Opaque; null on the last page.' }),
    has_more: z.boolean(),
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
