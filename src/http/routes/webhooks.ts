import Router from '@koa/router';
import { z } from 'zod';
import type { Actor } from '../../events/adminEvent.ts';
import { NotFoundError } from '../../platform/errors.ts';
import type { WebhookRegistry } from '../../webhooks/webhookRegistry.ts';
import { WEBHOOK_ID_PATTERN, webhookRegistrationSchema, type WebhookUrlPolicy } from '../../webhooks/webhookRules.ts';
import type { WebhookEndpoint } from '../../webhooks/webhookStore.ts';
import { requireScope } from '../authenticate.ts';
import { jsonBody, parseQuery } from '../requestInput.ts';
import { principalOf, type AppContext, type RequestState } from '../state.ts';
import { authenticatedResponse, json, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { noQuerySchema } from './events.ts';

/** The endpoint object (docs/webhooks.md); list output adds consecutive_failures and last_delivery_at. */
export const webhookEndpointSchema = z
  .looseObject({
    id: z.string().meta({ example: 'wh_6f1c0e3a9b2d4c5e8f7a6b5c4d3e2f1a' }),
    url: z.string().meta({ format: 'uri' }),
    event_filter: z.array(z.string()).meta({ description: 'Action prefixes; empty means every event.' }),
    description: z.string(),
    active: z.boolean(),
    created_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'WebhookEndpoint' });

export const webhookEndpointStatusSchema = webhookEndpointSchema
  .extend({
    consecutive_failures: z.int().meta({ description: 'Failed deliveries in a row; 10 disables the endpoint.' }),
    last_delivery_at: z.string().nullable().meta({ format: 'date-time', description: 'Time of the last attempt, whatever its outcome.' }),
  })
  .meta({ id: 'WebhookEndpointStatus' });

const registeredSchema = z
  .looseObject({ endpoint: webhookEndpointSchema, secret: z.string().meta({ description: 'HMAC signing secret (64 hex). Shown once.' }) })
  .meta({ id: 'WebhookRegistered' });
const endpointListSchema = z.looseObject({ endpoints: z.array(webhookEndpointStatusSchema) }).meta({ id: 'WebhookEndpointList' });
const disabledSchema = z.looseObject({ endpoint: webhookEndpointSchema }).meta({ id: 'WebhookDisabled' });

function toApi(endpoint: WebhookEndpoint) {
  return {
    id: endpoint.id,
    url: endpoint.url,
    event_filter: endpoint.eventFilter,
    description: endpoint.description,
    active: endpoint.active,
    created_at: endpoint.createdAt.toISOString(),
  };
}

function toApiWithStatus(endpoint: WebhookEndpoint) {
  return {
    ...toApi(endpoint),
    consecutive_failures: endpoint.consecutiveFailures,
    last_delivery_at: endpoint.lastDeliveryAt?.toISOString() ?? null,
  };
}

/** The caller as recorded in admin.webhook.* events: the key, never the person behind it. */
function actorOf(ctx: AppContext): Actor {
  const principal = principalOf(ctx);
  return {
    userId: `api_key:${principal.lookupId}`,
    userRole: 'api_key',
    sourceIp: ctx.state.clientAddress,
    userAgent: ctx.get('User-Agent').slice(0, 1024),
  };
}

/** A malformed id can name no endpoint: 404, like an unknown one. */
function endpointId(ctx: AppContext): string {
  const id = ctx.params.id!;
  if (!WEBHOOK_ID_PATTERN.test(id)) throw new NotFoundError('No such webhook endpoint.');
  return id;
}

export function webhookRoutes(registry: WebhookRegistry): Router<RequestState> {
  const router = new Router<RequestState>();

  router.post('/audit/webhooks', requireScope('webhooks:write'), jsonBody('16kb'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const { endpoint, secret } = await registry.register(principalOf(ctx).tenantId, ctx.request.body ?? {}, actorOf(ctx));
    ctx.status = 201;
    ctx.set('Location', `${ctx.path.replace(/\/$/, '')}/${endpoint.id}`);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { endpoint: toApi(endpoint), secret };
  });

  router.get('/audit/webhooks', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const endpoints = await registry.list(principalOf(ctx).tenantId);
    ctx.body = { endpoints: endpoints.map(toApiWithStatus) };
  });

  router.post('/audit/webhooks/:id/disable', requireScope('webhooks:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const endpoint = await registry.disable(principalOf(ctx).tenantId, endpointId(ctx), actorOf(ctx));
    ctx.body = { endpoint: toApi(endpoint) };
  });

  router.delete('/audit/webhooks/:id', requireScope('webhooks:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    await registry.delete(principalOf(ctx).tenantId, endpointId(ctx), actorOf(ctx));
    ctx.status = 204;
  });

  return router;
}

export function webhooksOpenApi(policy: WebhookUrlPolicy): OpenApiContribution {
  const registration = webhookRegistrationSchema(policy).meta({ id: 'WebhookRegistration' });
  const idParameter = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: WEBHOOK_ID_PATTERN.source } };
  const notYours = {
    '403': authenticatedResponse({ description: 'The key lacks webhooks:write, or the endpoint belongs to another tenant.', content: json(ref('Error')) }),
    '404': authenticatedResponse({ description: 'Unknown endpoint id.', content: json(ref('Error')) }),
    '409': authenticatedResponse({ description: 'The endpoint is managed by a Kubernetes WebhookEndpoint resource.', content: json(ref('Error')) }),
  };
  return {
    schemas: [registration, webhookEndpointSchema, webhookEndpointStatusSchema, registeredSchema, endpointListSchema, disabledSchema],
    paths: {
      '/audit/webhooks': {
        post: {
          operationId: 'registerWebhook',
          summary: 'Register a webhook endpoint. The signing secret is returned once.',
          security: [{ apiKey: [] }],
          requestBody: { required: true, content: json(ref('WebhookRegistration')) },
          responses: {
            '201': authenticatedResponse({
              description: 'Registered.',
              headers: { Location: { schema: { type: 'string' }, description: 'The new endpoint.' } },
              content: json(ref('WebhookRegistered')),
            }),
            ...standardErrorResponses('webhooks:write'),
          },
        },
        get: {
          operationId: 'listWebhooks',
          summary: "List the tenant's webhook endpoints with their delivery status.",
          security: [{ apiKey: [] }],
          responses: {
            '200': authenticatedResponse({ description: 'The endpoints.', content: json(ref('WebhookEndpointList')) }),
            ...standardErrorResponses('audit:read'),
          },
        },
      },
      '/audit/webhooks/{id}/disable': {
        post: {
          operationId: 'disableWebhook',
          summary: 'Stop deliveries to an endpoint, pending retries included. Idempotent; there is no re-enable.',
          security: [{ apiKey: [] }],
          parameters: [idParameter],
          responses: {
            '200': authenticatedResponse({ description: 'The endpoint, now inactive.', content: json(ref('WebhookDisabled')) }),
            ...standardErrorResponses('webhooks:write'),
            ...notYours,
          },
        },
      },
      '/audit/webhooks/{id}': {
        delete: {
          operationId: 'deleteWebhook',
          summary: 'Delete an endpoint and its delivery history.',
          security: [{ apiKey: [] }],
          parameters: [idParameter],
          responses: { '204': authenticatedResponse({ description: 'Deleted.' }), ...standardErrorResponses('webhooks:write'), ...notYours },
        },
      },
    },
  };
}
