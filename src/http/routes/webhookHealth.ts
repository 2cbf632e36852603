import Router from '@koa/router';
import { z } from 'zod';
import type { WebhookDeliveries } from '../../delivery/deliveryOperations.ts';
import { HEALTH_DELIVERIES, type EndpointHealth } from '../../delivery/endpointHealth.ts';
import { NotFoundError } from '../../platform/errors.ts';
import { WEBHOOK_ID_PATTERN } from '../../webhooks/webhookRules.ts';
import { requireScope } from '../authenticate.ts';
import { authenticatedResponse, json, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { parseQuery } from '../requestInput.ts';
import { principalOf, type RequestState } from '../state.ts';
import { noQuerySchema } from './events.ts';

const endpointHealthSchema = z
  .looseObject({
    window: z.string().meta({
      description: `What the figures cover: the endpoint's newest ${HEALTH_DELIVERIES.toLocaleString('en')} deliveries created in the last 24 hours, and their attempts.`,
    }),
    attempts: z.int(),
    succeeded: z.int().meta({ description: 'Attempts answered 2xx. Any other answer, a timeout or no connection is a failure.' }),
    success_rate: z.number().nullable().meta({ description: 'succeeded / attempts, 0 to 1; null without attempts.' }),
    failing_streak: z.int().meta({ description: 'Failed attempts since the last successful one, retried or not.' }),
    retrying: z.int().meta({ description: 'Deliveries waiting for their next attempt after a failed one.' }),
    last_success_at: z.string().nullable().meta({ format: 'date-time' }),
    last_failure: z
      .looseObject({
        at: z.string().meta({ format: 'date-time' }),
        status_code: z.int().nullable().meta({ description: 'null when no answer came (then error says why).' }),
        error: z.string().nullable(),
      })
      .nullable(),
  })
  .meta({ id: 'WebhookEndpointHealth' });
const healthEnvelopeSchema = z.looseObject({ health: endpointHealthSchema }).meta({ id: 'WebhookEndpointHealthEnvelope' });

function healthToApi(health: EndpointHealth) {
  return {
    window: `the newest ${HEALTH_DELIVERIES} deliveries of the last 24 hours`,
    attempts: health.attempts,
    succeeded: health.succeeded,
    success_rate: health.successRate,
    failing_streak: health.failingStreak,
    retrying: health.retrying,
    last_success_at: health.lastSuccessAt?.toISOString() ?? null,
    last_failure: health.lastFailure && {
      at: health.lastFailure.at.toISOString(),
      status_code: health.lastFailure.statusCode,
      error: health.lastFailure.error,
    },
  };
}

/** GET /audit/webhooks/{id}/health (docs/webhooks.md "Endpoint health"). */
export function webhookHealthRoutes(deliveries: WebhookDeliveries): Router<RequestState> {
  const router = new Router<RequestState>();
  router.get('/audit/webhooks/:id/health', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    // A malformed id can name no endpoint: 404, like an unknown one.
    if (!WEBHOOK_ID_PATTERN.test(ctx.params.id!)) throw new NotFoundError('No such webhook endpoint.');
    ctx.body = { health: healthToApi(await deliveries.health(principalOf(ctx).tenantId, ctx.params.id!)) };
  });
  return router;
}

export const webhookHealthOpenApi: OpenApiContribution = {
  schemas: [endpointHealthSchema, healthEnvelopeSchema],
  paths: {
    '/audit/webhooks/{id}/health': {
      get: {
        operationId: 'getWebhookHealth',
        summary: "How an endpoint is doing: its recent attempts' success rate, its failing streak, its last error.",
        security: [{ apiKey: [] }],
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: WEBHOOK_ID_PATTERN.source } }],
        responses: {
          '200': authenticatedResponse({
            description: 'The health.',
            content: json(ref('WebhookEndpointHealthEnvelope')),
          }),
          ...standardErrorResponses('audit:read'),
          '403': authenticatedResponse({
            description: 'The key lacks audit:read, or the endpoint belongs to another tenant.',
            content: json(ref('Error')),
          }),
          '404': authenticatedResponse({ description: 'Unknown endpoint.', content: json(ref('Error')) }),
        },
      },
    },
  },
};
