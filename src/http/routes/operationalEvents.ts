import Router from '@koa/router';
import { z } from 'zod';
import { invalidCursor, SignedCursor } from '../../events/cursor.ts';
import { pageOf, rowsToRead } from '../../platform/paging.ts';
import { listOperationalEvents, OPERATIONAL_EVENT_TYPES, type OperationalEvent } from '../../webhooks/operationalEvents.ts';
import type { Queryable } from '../../db/database.ts';
import { pageSchema } from '../apiSchemas.ts';
import { requireScope } from '../authenticate.ts';
import { authenticatedResponse, json, queryParameters, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { parseQuery, queryInteger } from '../requestInput.ts';
import { principalOf, type RequestState } from '../state.ts';

// GET /audit/webhooks/operational-events: the tenant's operational notices (docs/webhooks.md "Operational events").

const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 100;

const listQuerySchema = z.strictObject({
  limit: queryInteger(1, MAX_PAGE_SIZE)
    .optional()
    .meta({ description: `Page size, 1 to ${MAX_PAGE_SIZE}; default ${DEFAULT_PAGE_SIZE}.` }),
  cursor: z.string().max(200).optional().meta({ description: "The previous page's next_cursor, passed back unchanged. Opaque." }),
});

const operationalEventSchema = z
  .looseObject({
    id: z.string().meta({ format: 'uuid', description: "The notice's id: its deliveries' body id and webhook-id." }),
    type: z.enum(OPERATIONAL_EVENT_TYPES),
    occurred_at: z.string().meta({ format: 'date-time' }),
    resource: z.looseObject({ type: z.enum(['webhook_endpoint', 'log_stream']), id: z.string() }),
    details: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'OperationalEvent' });
const operationalEventListSchema = z
  .looseObject({ events: z.array(operationalEventSchema), page: pageSchema })
  .meta({ id: 'OperationalEventList' });

/** A notice's id: cursors are signed, but a malformed one must not reach Postgres as a cast error. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Page cursors of the list: opaque, authenticated, bound to the tenant, by the event list's rules. */
class OperationalCursorCodec {
  private readonly signed: SignedCursor;

  constructor(pepper: string) {
    // v2: the position in microseconds (v1 held milliseconds, and skipped notices of the same millisecond).
    this.signed = new SignedCursor(pepper, 'operational-cursor-v2');
  }

  encode(event: OperationalEvent, tenantId: string): string {
    return this.signed.encode(`${event.occurredUs}|${event.id}`, tenantId);
  }

  decode(cursor: string, tenantId: string): { occurredUs: string; id: string } {
    const [occurredUs, id, ...rest] = (this.signed.decode(cursor, tenantId) ?? '').split('|');
    if (rest.length > 0 || !occurredUs || !/^\d{1,19}$/.test(occurredUs) || !id || !UUID.test(id)) throw invalidCursor();
    return { occurredUs, id };
  }
}

function toApi(event: OperationalEvent) {
  return {
    id: event.id,
    type: event.type,
    occurred_at: event.occurredAt.toISOString(),
    resource: { type: event.resourceType, id: event.resourceId },
    details: event.details,
  };
}

export function operationalEventRoutes(db: Queryable, pepper: string): Router<RequestState> {
  const router = new Router<RequestState>();
  const cursors = new OperationalCursorCodec(pepper);
  router.get('/audit/webhooks/operational-events', requireScope('audit:read'), async (ctx) => {
    const query = parseQuery(listQuerySchema, ctx.query);
    const { tenantId } = principalOf(ctx);
    const limit = query.limit ?? DEFAULT_PAGE_SIZE;
    const before = query.cursor === undefined ? undefined : cursors.decode(query.cursor, tenantId);
    const rows = await listOperationalEvents(db, tenantId, rowsToRead(limit), before);
    const { rows: events, page } = pageOf(rows, limit, (last) => cursors.encode(last, tenantId));
    ctx.body = { events: events.map(toApi), page };
  });
  return router;
}

export const operationalEventsOpenApi: OpenApiContribution = {
  schemas: [operationalEventSchema, operationalEventListSchema],
  paths: {
    '/audit/webhooks/operational-events': {
      get: {
        operationId: 'listOperationalEvents',
        summary:
          "The tenant's operational notices, newest first: endpoints failing, disabled and enabled again, streams failing and recovered. Delivered to operational endpoints as they happen.",
        security: [{ apiKey: [] }],
        parameters: queryParameters(listQuerySchema),
        responses: {
          '200': authenticatedResponse({ description: 'One page of notices.', content: json(ref('OperationalEventList')) }),
          ...standardErrorResponses('audit:read'),
        },
      },
    },
  },
};
