import Router from '@koa/router';
import { z } from 'zod';
import type { EventReader } from '../../events/eventReader.ts';
import { filterFieldsSchema, toEventFilters } from '../../events/eventFilters.ts';
import { requireScope } from '../authenticate.ts';
import { parseQuery, queryBoolean, queryInteger } from '../requestInput.ts';
import { principalOf, type RequestState } from '../state.ts';
import { auditEventSchema, eventListSchema, pageSchema, redactionSchema } from '../apiSchemas.ts';
import { authenticatedResponse, json, queryParameters, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';

export const DEFAULT_PAGE_SIZE = 100;
const MAX_PAGE_SIZE = 1000;

/** Query parameters of GET /audit/events: validate requests, type the handler, document the API. */
export const listEventsQuerySchema = z
  .strictObject(filterFieldsSchema)
  .partial()
  .extend({
    phi_involved: queryBoolean().optional().meta({ description: filterFieldsSchema.phi_involved.description }),
    limit: queryInteger(1, MAX_PAGE_SIZE)
      .optional()
      .meta({ description: `Page size, 1 to ${MAX_PAGE_SIZE}; default ${DEFAULT_PAGE_SIZE}.` }),
    cursor: z.string().max(200).optional().meta({ description: "The previous page's next_cursor, passed back unchanged. Opaque." }),
  });

/** Endpoints without parameters still refuse unknown ones rather than ignore them. */
export const noQuerySchema = z.strictObject({});

export function eventRoutes(reader: EventReader): Router<RequestState> {
  const router = new Router<RequestState>();

  router.get('/audit/events', requireScope('audit:read'), async (ctx) => {
    const query = parseQuery(listEventsQuerySchema, ctx.query);
    const filters = toEventFilters(query);
    ctx.type = 'application/json';
    ctx.body = await reader.listPage({
      tenantId: principalOf(ctx).tenantId,
      filters,
      limit: query.limit ?? DEFAULT_PAGE_SIZE,
      cursor: query.cursor,
    });
  });

  router.get('/audit/events/:event_id', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.type = 'application/json';
    ctx.body = await reader.findOne(principalOf(ctx).tenantId, ctx.params.event_id!);
  });

  return router;
}

export const eventsOpenApi: OpenApiContribution = {
  schemas: [redactionSchema, auditEventSchema, pageSchema, eventListSchema],
  paths: {
    '/audit/events': {
      get: {
        operationId: 'listEvents',
        summary: "List the tenant's audit events, newest first.",
        security: [{ apiKey: [] }],
        parameters: queryParameters(listEventsQuerySchema),
        responses: {
          '200': authenticatedResponse({ description: 'One page of events.', content: json(ref('EventList')) }),
          ...standardErrorResponses('audit:read'),
        },
      },
    },
    '/audit/events/{event_id}': {
      get: {
        operationId: 'getEvent',
        summary: 'Look up one event by id.',
        security: [{ apiKey: [] }],
        parameters: [{ name: 'event_id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } }],
        responses: {
          '200': authenticatedResponse({ description: 'The event.', content: json(ref('AuditEvent')) }),
          '404': authenticatedResponse({
            description: "Unknown id, or another tenant's event (indistinguishable).",
            content: json(ref('Error')),
          }),
          ...standardErrorResponses('audit:read'),
        },
      },
    },
  },
};
