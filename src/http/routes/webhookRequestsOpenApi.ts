import { z } from 'zod';
import { json, ref, type OpenApiContribution } from '../openapi.ts';

// The requests the service makes to webhook endpoints (OpenAPI 3.1 `webhooks`), for webhooksOpenApi.ts.

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
    't=<unix seconds>,v1=<hex HMAC-SHA-256 over "t=<t>." and the raw body>; during a secret rotation one v1 per valid secret, the newest first. Absent for an endpoint signing with Ed25519 only.',
    't=1767225600,v1=5f0c…,v1=a41b…',
  ),
  header('webhook-id', 'Standard Webhooks: the event id (as X-Service-Event-Id).', '0192f5a4-7c1e-7d3a-9b2f-4c5d6e7f8a9b'),
  header('webhook-timestamp', 'Standard Webhooks: unix seconds, the t of X-Service-Signature.', '1767225600'),
  header(
    'webhook-signature',
    'Standard Webhooks, space-separated: v1,<base64 HMAC-SHA-256 over "<webhook-id>.<webhook-timestamp>.<body>">, keyed with the same secret, one per valid secret; and, for an endpoint signing with Ed25519, v1a,<base64 Ed25519 signature of the same bytes>, one per valid key (two of each during a rotation).',
    'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
  ),
  header('X-Service-Event-Id', 'The event id.', '0192f5a4-7c1e-7d3a-9b2f-4c5d6e7f8a9b'),
  header('X-Service-Delivery-Attempt', 'The attempt number, from 1.', '1'),
];

/** The delivery body's schema and the delivery request, for the OpenAPI document. */
export const deliveryRequests: Pick<OpenApiContribution, 'schemas' | 'webhooks'> = {
  schemas: [deliveryEnvelopeSchema],
  webhooks: {
    auditEvent: {
      post: {
        summary:
          "A delivery: one audit event matching the endpoint's filters (or, to an operational endpoint, one operational notice), POSTed to its URL with the endpoint's custom headers (docs/webhooks.md).",
        parameters: deliveryHeaders,
        requestBody: { required: true, content: json(ref('WebhookDelivery')) },
        responses: {
          '2XX': {
            description:
              "Delivered. Anything else (3xx included), or no answer within the endpoint's time limit (10 s by default), is a failed attempt.",
          },
        },
      },
    },
  },
};
