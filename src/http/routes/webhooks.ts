import Router from '@koa/router';
import { NotFoundError } from '../../platform/errors.ts';
import type { TestDeliveries } from '../../delivery/testDelivery.ts';
import { publicKeyText } from '../../client/webhookEd25519.ts';
import { standardWebhooksSecretOf } from '../../client/webhookSignature.ts';
import type { WebhookRegistry } from '../../webhooks/webhookRegistry.ts';
import { WEBHOOK_ID_PATTERN } from '../../webhooks/webhookRules.ts';
import type { WebhookEndpoint } from '../../webhooks/webhookEndpoint.ts';
import { describeEndpoint } from '../../webhooks/webhookEvents.ts';
import { requireScope } from '../authenticate.ts';
import { jsonBody, optionalJsonBody, parseQuery } from '../requestInput.ts';
import { actorOf, principalOf, type AppContext, type RequestState } from '../state.ts';
import { noQuerySchema } from './events.ts';

// The webhook endpoints' routes; what they answer is documented in webhooksOpenApi.ts.

/** The endpoint as every answer shows it: its settings (null: the service's default), header names, never values. */
function toApi(endpoint: WebhookEndpoint) {
  return {
    id: endpoint.id,
    ...describeEndpoint(endpoint),
    active: endpoint.active,
    created_at: endpoint.createdAt.toISOString(),
    public_key: endpoint.publicKey ? publicKeyText(endpoint.publicKey) : null,
  };
}

function toApiWithStatus(endpoint: WebhookEndpoint) {
  return {
    ...toApi(endpoint),
    consecutive_failures: endpoint.consecutiveFailures,
    last_delivery_at: endpoint.lastDeliveryAt?.toISOString() ?? null,
    previous_secret_expires_at: endpoint.previousSecretExpiresAt?.toISOString() ?? null,
  };
}

/** A malformed id can name no endpoint: 404, like an unknown one. */
function endpointId(ctx: AppContext): string {
  const id = ctx.params.id!;
  if (!WEBHOOK_ID_PATTERN.test(id)) throw new NotFoundError('No such webhook endpoint.');
  return id;
}

export function webhookRoutes(registry: WebhookRegistry, tests: TestDeliveries): Router<RequestState> {
  const router = new Router<RequestState>();

  router.post('/audit/webhooks', requireScope('webhooks:write'), jsonBody('16kb'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const { endpoint, secret } = await registry.register(principalOf(ctx).tenantId, ctx.request.body ?? {}, actorOf(ctx));
    ctx.status = 201;
    ctx.set('Location', `${ctx.path.replace(/\/$/, '')}/${endpoint.id}`);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { endpoint: toApi(endpoint), secret, standard_webhooks_secret: standardWebhooksSecretOf(secret) };
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

  router.patch('/audit/webhooks/:id', requireScope('webhooks:write'), jsonBody('16kb'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const id = endpointId(ctx);
    const endpoint = await registry.change(principalOf(ctx).tenantId, id, ctx.request.body ?? {}, actorOf(ctx));
    ctx.body = { endpoint: toApi(endpoint) };
  });

  router.post('/audit/webhooks/:id/enable', requireScope('webhooks:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const endpoint = await registry.enable(principalOf(ctx).tenantId, endpointId(ctx), actorOf(ctx));
    ctx.body = { endpoint: toApi(endpoint) };
  });

  router.get('/audit/webhooks/:id/public-keys', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const keys = await registry.publicKeys(principalOf(ctx).tenantId, endpointId(ctx));
    ctx.body = {
      public_keys: [
        ...(keys.current ? [{ public_key: publicKeyText(keys.current), expires_at: null }] : []),
        ...(keys.previous ? [{ public_key: publicKeyText(keys.previous.key), expires_at: keys.previous.expiresAt.toISOString() }] : []),
      ],
    };
  });

  router.post('/audit/webhooks/:id/rotate-secret', requireScope('webhooks:write'), optionalJsonBody('16kb'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const id = endpointId(ctx);
    // No body is every default; a body, even `null` or `[]`, must be the documented object.
    const input: unknown = ctx.request.body === undefined ? {} : ctx.request.body;
    const rotated = await registry.rotateSecret(principalOf(ctx).tenantId, id, input, actorOf(ctx));
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      endpoint: toApi(rotated.endpoint),
      secret: rotated.secret,
      standard_webhooks_secret: standardWebhooksSecretOf(rotated.secret),
      previous_secret_expires_at: rotated.previousSecretExpiresAt.toISOString(),
    };
  });

  router.post('/audit/webhooks/:id/test', requireScope('webhooks:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const result = await tests.send(principalOf(ctx).tenantId, endpointId(ctx), actorOf(ctx));
    ctx.body = { success: result.success, status_code: result.statusCode, duration_ms: result.durationMs, error: result.error };
  });

  router.delete('/audit/webhooks/:id', requireScope('webhooks:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    await registry.delete(principalOf(ctx).tenantId, endpointId(ctx), actorOf(ctx));
    ctx.status = 204;
  });

  return router;
}
