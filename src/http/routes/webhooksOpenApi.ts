import { z } from 'zod';
import { WEBHOOK_ID_PATTERN, secretRotationSchema, webhookRegistrationSchema, type WebhookUrlPolicy } from '../../webhooks/webhookRules.ts';
import { authenticatedResponse, json, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';

/** The endpoint object (docs/webhooks.md); list output adds consecutive_failures and last_delivery_at. */
const webhookEndpointSchema = z
  .looseObject({
    id: z.string().meta({ example: 'wh_6f1c0e3a9b2d4c5e8f7a6b5c4d3e2f1a' }),
    url: z.string().meta({ format: 'uri' }),
    event_filter: z.array(z.string()).meta({ description: 'Action prefixes; empty means every event.' }),
    description: z.string(),
    active: z.boolean(),
    created_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'WebhookEndpoint' });

const webhookEndpointStatusSchema = webhookEndpointSchema
  .extend({
    consecutive_failures: z.int().meta({ description: 'Failed deliveries in a row; 10 disables the endpoint.' }),
    last_delivery_at: z.string().nullable().meta({ format: 'date-time', description: 'Time of the last attempt, whatever its outcome.' }),
    previous_secret_expires_at: z.string().nullable().meta({
      format: 'date-time',
      description: 'While a rotated-out secret still signs beside the current one: until when. null otherwise.',
    }),
  })
  .meta({ id: 'WebhookEndpointStatus' });

const signingSecret = z.string().meta({
  description: 'HMAC signing secret (64 hex). Shown once.',
  example: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
});
const standardWebhooksSecret = z.string().meta({
  description:
    'The same key in the Standard Webhooks form: whsec_ and the base64 of the secret text (its 64 ASCII bytes are the HMAC key of both signatures).',
  example: 'whsec_OWY4NmQwODE4ODRjN2Q2NTlhMmZlYWEwYzU1YWQwMTVhM2JmNGYxYjJiMGI4MjJjZDE1ZDZjMTViMGYwMGEwOA==',
});
const registeredSchema = z
  .looseObject({ endpoint: webhookEndpointSchema, secret: signingSecret, standard_webhooks_secret: standardWebhooksSecret })
  .meta({ id: 'WebhookRegistered' });
const rotatedSchema = z
  .looseObject({
    endpoint: webhookEndpointSchema,
    secret: signingSecret,
    standard_webhooks_secret: standardWebhooksSecret,
    previous_secret_expires_at: z.string().meta({
      format: 'date-time',
      description: 'Until then every delivery is signed with the new and the replaced secret; after it with the new one only.',
    }),
  })
  .meta({ id: 'WebhookSecretRotated' });
const testResultSchema = z
  .looseObject({
    success: z.boolean().meta({ description: 'A 2xx within the delivery timeout.' }),
    status_code: z.int().nullable().meta({ description: "The receiver's status; null when no response arrived." }),
    duration_ms: z.int(),
    error: z
      .string()
      .nullable()
      .meta({ description: 'Why no usable response arrived (timeout, refused connection, refused target); null with a status.' }),
  })
  .meta({ id: 'WebhookTestResult' });
const endpointListSchema = z.looseObject({ endpoints: z.array(webhookEndpointStatusSchema) }).meta({ id: 'WebhookEndpointList' });
const disabledSchema = z.looseObject({ endpoint: webhookEndpointSchema }).meta({ id: 'WebhookDisabled' });

/** The body of a delivery (docs/webhooks.md "The delivery request"). */
const deliveryEnvelopeSchema = z
  .looseObject({
    type: z.string().meta({ description: "The event's action; webhook.test for a test send." }),
    id: z.string().meta({ format: 'uuid', description: 'The event id; stable across redeliveries. Receivers dedupe on (id, type).' }),
    timestamp: z.string().meta({ format: 'date-time' }),
    tenant_id: z.string(),
    actor: z.looseObject({ user_id: z.string(), user_role: z.string() }),
    resource: z.looseObject({ type: z.string(), id: z.string() }),
    phi_involved: z.boolean(),
    success: z.boolean(),
    details: z.record(z.string(), z.unknown()),
    schema_version: z.string().meta({ example: '1' }),
  })
  .meta({ id: 'WebhookDelivery' });

const header = (name: string, description: string, example: string) => ({
  name,
  in: 'header',
  required: true,
  description,
  schema: { type: 'string' },
  example,
});

/** The headers of every delivery, test sends included. */
const deliveryHeaders = [
  header(
    'X-Service-Signature',
    't=<unix seconds>,v1=<hex HMAC-SHA-256 over "t=<t>." and the raw body>; during a secret rotation one v1 per valid secret, the newest first.',
    't=1767225600,v1=5f0c…,v1=a41b…',
  ),
  header('webhook-id', 'Standard Webhooks: the event id (as X-Service-Event-Id).', '0192f5a4-7c1e-7d3a-9b2f-4c5d6e7f8a9b'),
  header('webhook-timestamp', 'Standard Webhooks: unix seconds, the t of X-Service-Signature.', '1767225600'),
  header(
    'webhook-signature',
    'Standard Webhooks: v1,<base64 HMAC-SHA-256 over "<webhook-id>.<webhook-timestamp>.<body>">, keyed with the same secret; space-separated, one per valid secret, during a rotation.',
    'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
  ),
  header('X-Service-Event-Id', 'The event id.', '0192f5a4-7c1e-7d3a-9b2f-4c5d6e7f8a9b'),
  header('X-Service-Delivery-Attempt', 'The attempt number, from 1.', '1'),
];

const idParameter = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: WEBHOOK_ID_PATTERN.source } };
const notYours = {
  '403': authenticatedResponse({
    description: 'The key lacks webhooks:write, or the endpoint belongs to another tenant.',
    content: json(ref('Error')),
  }),
  '404': authenticatedResponse({ description: 'Unknown endpoint id.', content: json(ref('Error')) }),
  '409': authenticatedResponse({
    description: 'The endpoint is managed by a Kubernetes WebhookEndpoint resource.',
    content: json(ref('Error')),
  }),
};
const inactive = {
  '409': authenticatedResponse({
    description:
      'endpoint_inactive: the endpoint is disabled; or (rotate-secret only) managed_by_kubernetes: a WebhookEndpoint resource owns it.',
    content: json(ref('Error')),
  }),
};

export function webhooksOpenApi(policy: WebhookUrlPolicy): OpenApiContribution {
  return {
    schemas: [
      webhookRegistrationSchema(policy).meta({ id: 'WebhookRegistration' }),
      secretRotationSchema.meta({ id: 'WebhookSecretRotation' }),
      webhookEndpointSchema,
      webhookEndpointStatusSchema,
      registeredSchema,
      endpointListSchema,
      disabledSchema,
      rotatedSchema,
      testResultSchema,
      deliveryEnvelopeSchema,
    ],
    webhooks: {
      auditEvent: {
        post: {
          summary: "A delivery: one audit event matching the endpoint's filter, POSTed to its URL (docs/webhooks.md).",
          parameters: deliveryHeaders,
          requestBody: { required: true, content: json(ref('WebhookDelivery')) },
          responses: { '2XX': { description: 'Delivered. Anything else (3xx included), or no answer within 10 s, is a failed attempt.' } },
        },
      },
    },
    paths: { ...endpointPaths(), ...endpointActionPaths() },
  };
}

/** Registering and listing endpoints. */
function endpointPaths(): OpenApiContribution['paths'] {
  return {
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
  };
}

/** What can be done to one endpoint: disable it, rotate its secret, send it a test, delete it. */
function endpointActionPaths(): OpenApiContribution['paths'] {
  return {
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
    '/audit/webhooks/{id}/rotate-secret': {
      post: {
        operationId: 'rotateWebhookSecret',
        summary:
          'Replace the signing secret. The replaced one keeps signing beside the new one for overlap_s seconds (one older secret still overlapping is retired at once), so receivers can switch without missing a delivery.',
        security: [{ apiKey: [] }],
        parameters: [idParameter],
        requestBody: { required: false, content: json(ref('WebhookSecretRotation')) },
        responses: {
          '200': authenticatedResponse({ description: 'The new secret, shown once.', content: json(ref('WebhookSecretRotated')) }),
          ...standardErrorResponses('webhooks:write'),
          ...notYours,
          ...inactive,
        },
      },
    },
    '/audit/webhooks/{id}/test': {
      post: {
        operationId: 'testWebhook',
        summary:
          'Send one signed webhook.test delivery now and report the outcome. Nothing is stored and a failure does not count towards auto-disable. Allowed on endpoints a WebhookEndpoint resource owns.',
        security: [{ apiKey: [] }],
        parameters: [idParameter],
        responses: {
          '200': authenticatedResponse({
            description: 'The outcome of the attempt (a failed attempt is still a 200).',
            content: json(ref('WebhookTestResult')),
          }),
          ...standardErrorResponses('webhooks:write'),
          ...notYours,
          ...inactive,
        },
      },
    },
    '/audit/webhooks/{id}': {
      delete: {
        operationId: 'deleteWebhook',
        summary: 'Delete an endpoint and its delivery history.',
        security: [{ apiKey: [] }],
        parameters: [idParameter],
        responses: {
          '204': authenticatedResponse({ description: 'Deleted.' }),
          ...standardErrorResponses('webhooks:write'),
          ...notYours,
        },
      },
    },
  };
}
