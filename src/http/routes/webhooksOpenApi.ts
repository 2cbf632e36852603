import { z } from 'zod';
import {
  ENDPOINT_KINDS,
  SIGNATURE_SCHEMES,
  WEBHOOK_ID_PATTERN,
  secretRotationSchema,
  webhookChangesSchema,
  webhookRegistrationSchema,
  type WebhookUrlPolicy,
} from '../../webhooks/webhookRules.ts';
import { authenticatedResponse, json, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { deliveryRequests } from './webhookRequestsOpenApi.ts';
import { payloadFilterSchema } from '../../webhooks/payloadFilter.ts';

/** The endpoint object (docs/webhooks.md); list output adds consecutive_failures and last_delivery_at. */
const webhookEndpointSchema = z
  .looseObject({
    id: z.string().meta({ example: 'wh_6f1c0e3a9b2d4c5e8f7a6b5c4d3e2f1a' }),
    url: z.string().meta({ format: 'uri' }),
    event_filter: z.array(z.string()).meta({ description: 'Action prefixes; empty means every event.' }),
    description: z.string(),
    active: z.boolean(),
    created_at: z.string().meta({ format: 'date-time' }),
    kind: z.enum(ENDPOINT_KINDS).meta({ description: "events: the trail's events; operational: the service's notices." }),
    payload_filter: payloadFilterSchema.nullable(),
    header_names: z.array(z.string()).meta({ description: 'The custom headers every delivery carries; their values are never shown.' }),
    timeout_s: z.int().nullable().meta({ description: "Seconds a receiver has to answer; null: the service's default (10)." }),
    retry_schedule_s: z
      .array(z.int())
      .nullable()
      .meta({ description: "Seconds between attempts; null: the service's schedule (60, 300, 1800, 7200)." }),
    rate_limit_per_s: z.int().nullable().meta({ description: 'Deliveries per second at most; null: no limit.' }),
    ordered: z.boolean().meta({ description: 'One delivery at a time, in the order the events were written.' }),
    signature_schemes: z.array(z.enum(SIGNATURE_SCHEMES)).meta({ description: 'hmac: v1 signatures; ed25519: v1a signatures.' }),
    public_key: z
      .string()
      .nullable()
      .meta({ description: 'The Ed25519 public key (whpk_…) v1a signatures verify with; null until ed25519 was first asked for.' }),
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
const endpointAnswerSchema = z.looseObject({ endpoint: webhookEndpointSchema }).meta({ id: 'WebhookEndpointAnswer' });
const publicKeysSchema = z
  .looseObject({
    public_keys: z.array(
      z.looseObject({
        public_key: z.string().meta({ description: 'whpk_ and the base64 of the 32-byte Ed25519 public key.' }),
        expires_at: z
          .string()
          .nullable()
          .meta({ format: 'date-time', description: 'null for the current key; the end of its overlap for the key a rotation replaced.' }),
      }),
    ),
  })
  .meta({ id: 'WebhookPublicKeys' });

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
      payloadFilterSchema,
      webhookRegistrationSchema(policy).meta({ id: 'WebhookRegistration' }),
      webhookChangesSchema(policy).meta({ id: 'WebhookChanges' }),
      secretRotationSchema.meta({ id: 'WebhookSecretRotation' }),
      webhookEndpointSchema,
      webhookEndpointStatusSchema,
      registeredSchema,
      endpointListSchema,
      endpointAnswerSchema,
      publicKeysSchema,
      rotatedSchema,
      testResultSchema,
      ...deliveryRequests.schemas!,
    ],
    webhooks: deliveryRequests.webhooks,
    paths: { ...endpointPaths(), ...endpointActionPaths(), ...endpointChangePaths() },
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

/** Disabling and enabling an endpoint, and reading its public keys. */
function endpointActionPaths(): OpenApiContribution['paths'] {
  return {
    '/audit/webhooks/{id}/disable': {
      post: {
        operationId: 'disableWebhook',
        summary: 'Stop deliveries to an endpoint, pending retries included (they are cancelled). Idempotent.',
        security: [{ apiKey: [] }],
        parameters: [idParameter],
        responses: {
          '200': authenticatedResponse({ description: 'The endpoint, now inactive.', content: json(ref('WebhookEndpointAnswer')) }),
          ...standardErrorResponses('webhooks:write'),
          ...notYours,
        },
      },
    },
    '/audit/webhooks/{id}/enable': {
      post: {
        operationId: 'enableWebhook',
        summary:
          'Make a disabled endpoint (by hand or automatically) active again, with its id, secrets and history, its failure count at 0. The deliveries cancelled when it was disabled stay cancelled; events written while it was disabled have none (a replay delivers them). Idempotent.',
        security: [{ apiKey: [] }],
        parameters: [idParameter],
        responses: {
          '200': authenticatedResponse({ description: 'The endpoint, now active.', content: json(ref('WebhookEndpointAnswer')) }),
          ...standardErrorResponses('webhooks:write'),
          ...notYours,
        },
      },
    },
    '/audit/webhooks/{id}/public-keys': {
      get: {
        operationId: 'getWebhookPublicKeys',
        summary: "The endpoint's Ed25519 public keys: the current one, and during a rotation's overlap the replaced one with its expiry.",
        security: [{ apiKey: [] }],
        parameters: [idParameter],
        responses: {
          '200': authenticatedResponse({
            description: 'The keys; none before ed25519 was first asked for.',
            content: json(ref('WebhookPublicKeys')),
          }),
          ...standardErrorResponses('audit:read'),
          '403': notYours['403'],
          '404': notYours['404'],
        },
      },
    },
  };
}

/** Rotating an endpoint's secret, sending it a test, changing and deleting it. */
function endpointChangePaths(): OpenApiContribution['paths'] {
  return {
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
      patch: {
        operationId: 'updateWebhook',
        summary:
          "Change an endpoint's settings in place (its id, secrets and history kept): only the fields given; null returns a setting to its default, headers sets or removes the headers it names.",
        security: [{ apiKey: [] }],
        parameters: [idParameter],
        requestBody: { required: true, content: json(ref('WebhookChanges')) },
        responses: {
          '200': authenticatedResponse({ description: 'The endpoint as it now is.', content: json(ref('WebhookEndpointAnswer')) }),
          ...standardErrorResponses('webhooks:write'),
          ...notYours,
        },
      },
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
