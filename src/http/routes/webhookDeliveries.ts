import Router from '@koa/router';
import { z } from 'zod';
import type { AttemptEntry, DeliveryLogEntry } from '../../delivery/deliveryLog.ts';
import { toEventFilters } from '../../events/eventFilters.ts';
import { filterFieldsSchema } from '../../events/eventFilters.ts';
import type { Replay } from '../../delivery/replayStore.ts';
import {
  DELIVERY_ID_PATTERN,
  DELIVERY_STATUSES,
  REPLAY_ID_PATTERN,
  replayRequestSchema,
  statusOf,
  type WebhookDeliveries,
} from '../../delivery/deliveryOperations.ts';
import { WEBHOOK_ID_PATTERN } from '../../webhooks/webhookRules.ts';
import { NotFoundError } from '../../platform/errors.ts';
import { pageSchema } from '../apiSchemas.ts';
import { requireScope } from '../authenticate.ts';
import { authenticatedResponse, json, queryParameters, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { jsonBody, parseQuery, queryInteger } from '../requestInput.ts';
import { actorOf, principalOf, type AppContext, type RequestState } from '../state.ts';
import { noQuerySchema } from './events.ts';

const DEFAULT_DELIVERY_PAGE_SIZE = 50;
const MAX_DELIVERY_PAGE_SIZE = 100;

const listDeliveriesQuerySchema = z.strictObject({
  status: z
    .enum(DELIVERY_STATUSES)
    .optional()
    .meta({ description: '`failed` includes deliveries cancelled when their endpoint was disabled.' }),
  since: filterFieldsSchema.since.optional().meta({ description: 'Deliveries created at or after (RFC 3339).' }),
  until: filterFieldsSchema.until.optional().meta({ description: 'Deliveries created before (RFC 3339).' }),
  limit: queryInteger(1, MAX_DELIVERY_PAGE_SIZE)
    .optional()
    .meta({ description: `Page size, 1 to ${MAX_DELIVERY_PAGE_SIZE}; default ${DEFAULT_DELIVERY_PAGE_SIZE}.` }),
  cursor: z.string().max(200).optional().meta({ description: "The previous page's next_cursor, passed back unchanged. Opaque." }),
});

const iso = (date: Date | null) => date?.toISOString() ?? null;

const deliverySchema = z
  .looseObject({
    id: z.string().meta({ example: 'dlv_18211' }),
    event_id: z.string().meta({ format: 'uuid' }),
    action: z.string().nullable().meta({ description: "The event's action; null once retention has dropped the event." }),
    status: z.enum(DELIVERY_STATUSES),
    attempts: z.int(),
    created_at: z.string().meta({ format: 'date-time' }),
    next_attempt_at: z.string().nullable().meta({ format: 'date-time', description: 'When the next attempt is due; null unless pending.' }),
    last_attempt_at: z.string().nullable().meta({ format: 'date-time' }),
    last_status_code: z.int().nullable(),
    last_error: z.string().nullable(),
  })
  .meta({ id: 'Delivery' });
const attemptSchema = z
  .looseObject({
    attempt: z.int(),
    started_at: z.string().meta({ format: 'date-time' }),
    duration_ms: z.int(),
    status_code: z.int().nullable(),
    error: z.string().nullable(),
    response_excerpt: z.string().meta({ description: "At most the first 1 KiB of the receiver's response body, as UTF-8 text." }),
  })
  .meta({ id: 'DeliveryAttempt' });
const replaySchema = z
  .looseObject({
    id: z.string().meta({ example: 'rpl_0c6f1e3a9b2d4c5e8f7a6b5c4d3e2f1a' }),
    status: z.enum(['running', 'completed', 'cancelled']),
    since: z.string().meta({ format: 'date-time' }),
    until: z.string().meta({ format: 'date-time' }),
    only_undelivered: z.boolean(),
    events_matched: z.int(),
    deliveries_created: z.int(),
    created_at: z.string().meta({ format: 'date-time' }),
    completed_at: z.string().nullable().meta({ format: 'date-time' }),
  })
  .meta({ id: 'Replay' });
export const deliveryListSchema = z.looseObject({ deliveries: z.array(deliverySchema), page: pageSchema }).meta({ id: 'DeliveryList' });
export const deliveryDetailSchema = z
  .looseObject({ delivery: deliverySchema, attempts: z.array(attemptSchema) })
  .meta({ id: 'DeliveryDetail' });
export const deliveryEnvelopeSchema = z.looseObject({ delivery: deliverySchema }).meta({ id: 'DeliveryRetried' });
export const replayEnvelopeSchema = z.looseObject({ replay: replaySchema }).meta({ id: 'ReplayStatus' });

function deliveryToApi(delivery: DeliveryLogEntry) {
  return {
    id: `dlv_${delivery.id}`,
    event_id: delivery.eventId,
    action: delivery.action ?? null,
    status: statusOf(delivery.state),
    attempts: delivery.attempts,
    created_at: delivery.createdAt.toISOString(),
    // A queued delivery waits for its turn, not for a time.
    next_attempt_at: statusOf(delivery.state) === 'pending' && delivery.state !== 'queued' ? delivery.dueAt.toISOString() : null,
    last_attempt_at: iso(delivery.lastAttemptAt),
    last_status_code: delivery.lastStatusCode,
    last_error: delivery.lastError,
  };
}

function attemptToApi(attempt: AttemptEntry) {
  return {
    attempt: attempt.attempt,
    started_at: attempt.startedAt.toISOString(),
    duration_ms: attempt.durationMs,
    status_code: attempt.statusCode,
    error: attempt.error,
    response_excerpt: attempt.responseExcerpt,
  };
}

function replayToApi(replay: Replay) {
  return {
    id: replay.id,
    status: replay.status,
    since: replay.since.toISOString(),
    until: replay.until.toISOString(),
    only_undelivered: replay.onlyUndelivered,
    events_matched: replay.eventsMatched,
    deliveries_created: replay.deliveriesCreated,
    created_at: replay.createdAt.toISOString(),
    completed_at: iso(replay.completedAt),
  };
}

/** A malformed id can name no endpoint: 404, like an unknown one (as the registry's routes). */
function endpointId(ctx: AppContext): string {
  const id = ctx.params.id!;
  if (!WEBHOOK_ID_PATTERN.test(id)) throw new NotFoundError('No such webhook endpoint.');
  return id;
}

export function webhookDeliveryRoutes(deliveries: WebhookDeliveries): Router<RequestState> {
  const router = new Router<RequestState>();

  router.get('/audit/webhooks/:id/deliveries', requireScope('audit:read'), async (ctx) => {
    const query = parseQuery(listDeliveriesQuerySchema, ctx.query);
    // The event list's time rules: RFC 3339, since earlier than until.
    const { sinceMs, untilMs } = toEventFilters({ since: query.since, until: query.until });
    const page = await deliveries.list(principalOf(ctx).tenantId, endpointId(ctx), {
      status: query.status,
      sinceMs,
      untilMs,
      limit: query.limit ?? DEFAULT_DELIVERY_PAGE_SIZE,
      cursor: query.cursor,
    });
    ctx.body = { deliveries: page.deliveries.map(deliveryToApi), page: page.page };
  });

  router.get('/audit/webhooks/:id/deliveries/:delivery_id', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const { delivery, attempts } = await deliveries.get(principalOf(ctx).tenantId, endpointId(ctx), ctx.params.delivery_id!);
    ctx.body = { delivery: deliveryToApi(delivery), attempts: attempts.map(attemptToApi) };
  });

  router.post('/audit/webhooks/:id/deliveries/:delivery_id/retry', requireScope('webhooks:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const delivery = await deliveries.retry(principalOf(ctx).tenantId, endpointId(ctx), ctx.params.delivery_id!, actorOf(ctx));
    ctx.status = 202;
    ctx.body = { delivery: deliveryToApi(delivery) };
  });

  router.post('/audit/webhooks/:id/replay', requireScope('webhooks:write'), jsonBody('4kb'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const replay = await deliveries.startReplay(principalOf(ctx).tenantId, endpointId(ctx), ctx.request.body ?? {}, actorOf(ctx));
    ctx.status = 202;
    ctx.set('Location', `${ctx.path.replace(/\/replay\/?$/, '')}/replays/${replay.id}`);
    ctx.body = { replay: replayToApi(replay) };
  });

  router.get('/audit/webhooks/:id/replays/:replay_id', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = { replay: replayToApi(await deliveries.getReplay(principalOf(ctx).tenantId, endpointId(ctx), ctx.params.replay_id!)) };
  });

  return router;
}

const idParameter = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: WEBHOOK_ID_PATTERN.source } };
const deliveryParameter = {
  name: 'delivery_id',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: DELIVERY_ID_PATTERN.source },
};
const replayParameter = { name: 'replay_id', in: 'path', required: true, schema: { type: 'string', pattern: REPLAY_ID_PATTERN.source } };
const notYours = (scope: string, what: string) => ({
  '403': authenticatedResponse({
    description: `The key lacks ${scope}, or the endpoint belongs to another tenant.`,
    content: json(ref('Error')),
  }),
  '404': authenticatedResponse({ description: `Unknown endpoint${what}.`, content: json(ref('Error')) }),
});

export function webhookDeliveriesOpenApi(): OpenApiContribution {
  return {
    schemas: [
      deliverySchema,
      attemptSchema,
      replaySchema,
      deliveryListSchema,
      deliveryDetailSchema,
      deliveryEnvelopeSchema,
      replayEnvelopeSchema,
      replayRequestSchema,
    ],
    paths: { ...deliveryPaths(), ...replayPaths() },
  };
}

/** An endpoint's deliveries: the list, one delivery, a manual retry. */
function deliveryPaths(): OpenApiContribution['paths'] {
  return {
    '/audit/webhooks/{id}/deliveries': {
      get: {
        operationId: 'listWebhookDeliveries',
        summary: "An endpoint's deliveries, newest first.",
        security: [{ apiKey: [] }],
        parameters: [idParameter, ...queryParameters(listDeliveriesQuerySchema)],
        responses: {
          '200': authenticatedResponse({ description: 'One page of deliveries.', content: json(ref('DeliveryList')) }),
          ...standardErrorResponses('audit:read'),
          ...notYours('audit:read', ''),
        },
      },
    },
    '/audit/webhooks/{id}/deliveries/{delivery_id}': {
      get: {
        operationId: 'getWebhookDelivery',
        summary: 'One delivery with its attempts and what the receiver answered.',
        security: [{ apiKey: [] }],
        parameters: [idParameter, deliveryParameter],
        responses: {
          '200': authenticatedResponse({ description: 'The delivery.', content: json(ref('DeliveryDetail')) }),
          ...standardErrorResponses('audit:read'),
          ...notYours('audit:read', ' or delivery'),
        },
      },
    },
    '/audit/webhooks/{id}/deliveries/{delivery_id}/retry': {
      post: {
        operationId: 'retryWebhookDelivery',
        summary: 'One more attempt of a failed or pending delivery, made within a second.',
        security: [{ apiKey: [] }],
        parameters: [idParameter, deliveryParameter],
        responses: {
          '202': authenticatedResponse({ description: 'The attempt is scheduled.', content: json(ref('DeliveryRetried')) }),
          ...standardErrorResponses('webhooks:write'),
          ...notYours('webhooks:write', ' or delivery'),
          '409': authenticatedResponse({
            description: '`already_delivered`: the delivery succeeded; `endpoint_inactive`: the endpoint is disabled.',
            content: json(ref('Error')),
          }),
        },
      },
    },
  };
}

/** Replays of a time range, and their progress. */
function replayPaths(): OpenApiContribution['paths'] {
  return {
    '/audit/webhooks/{id}/replay': {
      post: {
        operationId: 'replayWebhookDeliveries',
        summary: "Deliver again every event of a time range that matches the endpoint's filter.",
        security: [{ apiKey: [] }],
        parameters: [idParameter],
        requestBody: { required: true, content: json(ref('ReplayRequest')) },
        responses: {
          '202': authenticatedResponse({
            description: 'The replay has started.',
            headers: { Location: { schema: { type: 'string' }, description: 'The replay, for its progress.' } },
            content: json(ref('ReplayStatus')),
          }),
          ...standardErrorResponses('webhooks:write'),
          ...notYours('webhooks:write', ''),
          '409': authenticatedResponse({
            description: '`replay_running`: a replay of this endpoint is still running; `endpoint_inactive`: the endpoint is disabled.',
            content: json(ref('Error')),
          }),
        },
      },
    },
    '/audit/webhooks/{id}/replays/{replay_id}': {
      get: {
        operationId: 'getWebhookReplay',
        summary: "A replay's progress.",
        security: [{ apiKey: [] }],
        parameters: [idParameter, replayParameter],
        responses: {
          '200': authenticatedResponse({ description: 'The replay.', content: json(ref('ReplayStatus')) }),
          ...standardErrorResponses('audit:read'),
          ...notYours('audit:read', ' or replay'),
        },
      },
    },
  };
}
