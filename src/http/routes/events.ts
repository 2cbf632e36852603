import Router from '@koa/router';
import { z } from 'zod';
import type { EventReader } from '../../events/eventReader.ts';
import { COUNT_CAP } from '../../events/eventCount.ts';
import { filterFieldsSchema, toEventFilters } from '../../events/eventFilters.ts';
import { SEARCH_SCAN_ROWS, searchText } from '../../events/eventSearch.ts';
import { ACTIONS_LISTED } from '../../events/tenantActions.ts';
import { requireScope } from '../authenticate.ts';
import { parseQuery, queryBoolean, queryInteger } from '../requestInput.ts';
import { principalOf, type RequestState } from '../state.ts';
import { auditEventSchema, eventListSchema, pageSchema, redactionSchema } from '../apiSchemas.ts';
import { authenticatedResponse, json, queryParameters, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';

export const DEFAULT_PAGE_SIZE = 100;
const MAX_PAGE_SIZE = 1000;
/** Longer text is no identifier a person would type. */
const SEARCH_MAX_LENGTH = 100;

/** The list's filters as query parameters (phi_involved as text): the count's and the live stream's too. */
export const filterQuerySchema = z
  .strictObject(filterFieldsSchema)
  .partial()
  .extend({ phi_involved: queryBoolean().optional().meta({ description: filterFieldsSchema.phi_involved.description }) });

/** Query parameters of GET /audit/events: validate requests, type the handler, document the API. */
export const listEventsQuerySchema = filterQuerySchema.extend({
  limit: queryInteger(1, MAX_PAGE_SIZE)
    .optional()
    .meta({ description: `Page size, 1 to ${MAX_PAGE_SIZE}; default ${DEFAULT_PAGE_SIZE}.` }),
  cursor: z.string().max(200).optional().meta({ description: "The previous page's next_cursor, passed back unchanged. Opaque." }),
  q: z
    .string()
    .max(SEARCH_MAX_LENGTH)
    .refine((text) => text.trim().length > 0, 'must hold some text')
    .optional()
    .meta({
      description: `Search: a case-insensitive part of the event's id, action, user_id, resource_type or resource_id. Each page searches at most ${SEARCH_SCAN_ROWS.toLocaleString('en')} events of the window, newest first; a page that stops short says how far it searched (page.searched_to) and its next_cursor searches on.`,
      example: 'patient-88',
    }),
});

const eventCountSchema = z
  .looseObject({
    count: z.int().meta({ description: `The events the filters match, up to ${COUNT_CAP.toLocaleString('en')}.` }),
    capped: z.boolean().meta({ description: `true: more than ${COUNT_CAP.toLocaleString('en')} match, and count is that cap.` }),
  })
  .meta({ id: 'EventCount' });

const actionListSchema = z
  .looseObject({
    actions: z.array(z.string()).meta({ description: "The distinct actions of the tenant's trail, sorted." }),
    truncated: z.boolean().meta({ description: `true: the trail has more than the ${ACTIONS_LISTED.toLocaleString('en')} listed.` }),
  })
  .meta({ id: 'ActionList' });

/** Endpoints without parameters still refuse unknown ones rather than ignore them. */
export const noQuerySchema = z.strictObject({});

export function eventRoutes(reader: EventReader): Router<RequestState> {
  const router = new Router<RequestState>();

  router.get('/audit/events', requireScope('audit:read'), async (ctx) => {
    const query = parseQuery(listEventsQuerySchema, ctx.query);
    const filters = { ...toEventFilters(query), ...(query.q === undefined ? {} : { search: searchText(query.q) }) };
    ctx.type = 'application/json';
    ctx.body = await reader.listPage({
      tenantId: principalOf(ctx).tenantId,
      filters,
      limit: query.limit ?? DEFAULT_PAGE_SIZE,
      cursor: query.cursor,
    });
  });

  // Before /audit/events/:event_id, which would take "count" for an id.
  router.get('/audit/events/count', requireScope('audit:read'), async (ctx) => {
    const filters = toEventFilters(parseQuery(filterQuerySchema, ctx.query));
    ctx.body = await reader.count(principalOf(ctx).tenantId, filters);
  });

  router.get('/audit/actions', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = await reader.actions(principalOf(ctx).tenantId);
  });

  router.get('/audit/events/:event_id', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.type = 'application/json';
    ctx.body = await reader.findOne(principalOf(ctx).tenantId, ctx.params.event_id!);
  });

  return router;
}

export const eventsOpenApi: OpenApiContribution = {
  schemas: [redactionSchema, auditEventSchema, pageSchema, eventListSchema, eventCountSchema, actionListSchema],
  paths: {
    '/audit/events/count': {
      get: {
        operationId: 'countEvents',
        summary: `How many events the list's filters match, counted up to ${COUNT_CAP.toLocaleString('en')} (capped: true beyond).`,
        security: [{ apiKey: [] }],
        parameters: queryParameters(filterQuerySchema),
        responses: {
          '200': authenticatedResponse({ description: 'The count.', content: json(ref('EventCount')) }),
          ...standardErrorResponses('audit:read'),
        },
      },
    },
    '/audit/actions': {
      get: {
        operationId: 'listActions',
        summary: "The distinct actions of the tenant's trail, to pick a filter from.",
        security: [{ apiKey: [] }],
        responses: {
          '200': authenticatedResponse({ description: 'The actions.', content: json(ref('ActionList')) }),
          ...standardErrorResponses('audit:read'),
        },
      },
    },
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
