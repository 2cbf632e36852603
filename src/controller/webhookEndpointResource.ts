import { z } from 'zod';
import {
  DEFAULT_ROTATION_OVERLAP_S,
  ENDPOINT_KINDS,
  MAX_RATE_LIMIT_PER_S,
  MAX_RETRY_DELAY_S,
  MAX_RETRY_DELAYS,
  MAX_ROTATION_OVERLAP_S,
  MAX_TIMEOUT_S,
  SIGNATURE_SCHEMES,
  WEBHOOK_DESCRIPTION_MAX_LENGTH,
  WEBHOOK_FILTER_ENTRY_MAX_LENGTH,
  WEBHOOK_FILTER_ENTRY_PATTERN,
  WEBHOOK_FILTER_MAX_ENTRIES,
  WEBHOOK_URL_MAX_LENGTH,
} from '../webhooks/webhookRules.ts';
import {
  ROTATE_ANNOTATION,
  conditions,
  controllerClass,
  controllerClassImmutable,
  readyColumns,
  rotateRequest,
  secretName,
  tenantId,
  type ResourceKind,
} from './resources.ts';

/**
 * The WebhookEndpoint custom resource (docs/kubernetes.md "WebhookEndpoint"): a tenant's webhook endpoint
 * declared in Kubernetes, its signing secret written to a Secret the controller owns. Limits come from the
 * constants the public API validates with; the payload filter and the settings are checked by the registry,
 * as PATCH /audit/webhooks/{id} checks them.
 */

/**
 * Set to a new value to enable again the endpoint of a WebhookEndpoint that was disabled automatically (after
 * failed deliveries): the same endpoint, id and secret, its failure count at 0. Acts once per value.
 */
export const ENABLE_ANNOTATION = 'audittrail.dev/enable';
export const webhookEndpointSpecSchema = z
  .object({
    tenantId,
    url: z
      .string()
      .max(WEBHOOK_URL_MAX_LENGTH)
      .regex(/^https?:\/\/[^\s/@]+(\/\S*)?$/)
      .meta({
        description: 'Delivery target: https (http only where the service allows it), no credentials, a public address.',
        'x-kubernetes-validations': [{ rule: 'isURL(self)', message: 'must be an absolute URL' }],
      }),
    eventFilter: z
      .array(z.string().max(WEBHOOK_FILTER_ENTRY_MAX_LENGTH).regex(WEBHOOK_FILTER_ENTRY_PATTERN))
      .max(WEBHOOK_FILTER_MAX_ENTRIES)
      .optional()
      .meta({ description: 'Action prefixes such as phi. or admin.key.create; empty or absent means every event.' }),
    description: z.string().max(WEBHOOK_DESCRIPTION_MAX_LENGTH).optional(),
    kind: z.enum(ENDPOINT_KINDS).optional().meta({
      description:
        "events (absent): the trail's events; operational: the service's notices about the tenant's endpoints and streams. Immutable.",
    }),
    payloadFilter: z.record(z.string(), z.unknown()).optional().meta({
      description:
        'Conditions on the delivery body an event must meet, as the API\'s payload_filter (docs/webhooks.md "Payload filters"), e.g. {"path": "details.ward", "equals": "3B"} or {"all": [...]}. Checked by the controller: a filter it refuses shows as InvalidSpec.',
      'x-kubernetes-preserve-unknown-fields': true,
    }),
    timeoutSeconds: z
      .int()
      .min(1)
      .max(MAX_TIMEOUT_S)
      .optional()
      .meta({ description: "Seconds a receiver has to answer an attempt (absent: the service's default, 10)." }),
    retryScheduleSeconds: z
      .array(z.int().min(1).max(MAX_RETRY_DELAY_S))
      .max(MAX_RETRY_DELAYS)
      .optional()
      .meta({ description: "Seconds between a failed attempt and the next (absent: the service's schedule); at most three days in all." }),
    rateLimitPerSecond: z
      .int()
      .min(1)
      .max(MAX_RATE_LIMIT_PER_S)
      .optional()
      .meta({ description: 'Deliveries per second at most, over every worker (absent: no limit).' }),
    ordered: z.boolean().optional().meta({ description: 'One delivery at a time, in the order the events were written.' }),
    signatureSchemes: z.array(z.enum(SIGNATURE_SCHEMES)).min(1).optional().meta({
      description:
        'The signatures deliveries carry: hmac (absent: hmac only), ed25519, or both. With ed25519 the Secret also holds publicKey.',
      'x-kubernetes-list-type': 'set',
    }),
    disabled: z
      .boolean()
      .optional()
      .meta({ description: 'true disables the endpoint: deliveries stop, its history stays. Back to false (or absent) enables it again.' }),
    rotationOverlapSeconds: z
      .int()
      .min(0)
      .max(MAX_ROTATION_OVERLAP_S)
      .optional()
      .meta({
        description: `When the ${ROTATE_ANNOTATION} annotation rotates the signing secret: seconds the replaced secret keeps signing beside the new one (absent: ${DEFAULT_ROTATION_OVERLAP_S}, one day; 0 retires it at once).`,
      }),
    secretName,
    controllerClass,
  })
  .meta({
    'x-kubernetes-validations': [
      { rule: 'self.tenantId == oldSelf.tenantId', message: 'tenantId is immutable; create another WebhookEndpoint' },
      { rule: 'self.secretName == oldSelf.secretName', message: 'secretName is immutable' },
      {
        rule: "(has(self.kind) ? self.kind : 'events') == (has(oldSelf.kind) ? oldSelf.kind : 'events')",
        message: 'kind is immutable; create another WebhookEndpoint',
      },
      controllerClassImmutable,
    ],
  });

const webhookEndpointStatusSchema = z.object({
  id: z.string().optional(),
  active: z.boolean().optional(),
  consecutiveFailures: z.int().min(0).optional(),
  lastDeliveryAt: z.string().optional().meta({ format: 'date-time' }),
  recreateRequest: z
    .string()
    .optional()
    .meta({ description: 'The audittrail.dev/recreate annotation value the current endpoint was created for.' }),
  enableRequest: z
    .string()
    .optional()
    .meta({ description: `The ${ENABLE_ANNOTATION} annotation value handled last.` }),
  publicKey: z
    .string()
    .optional()
    .meta({ description: "The endpoint's Ed25519 public key (whpk_…) receivers verify v1a signatures with." }),
  previousSecretExpiresAt: z.string().optional().meta({
    format: 'date-time',
    description: 'After a rotation: until when the replaced signing secret still signs deliveries beside the one in the Secret.',
  }),
  rotateRequest,
  observedGeneration: z.int().min(0).optional(),
  conditions,
});

export type WebhookEndpointSpec = z.output<typeof webhookEndpointSpecSchema>;

export const WEBHOOK_ENDPOINT: ResourceKind = {
  kind: 'WebhookEndpoint',
  description:
    "A webhook endpoint of one tenant: the service delivers the tenant's audit events to spec.url, signed with the secret the controller writes into the Secret spec.secretName. Deleting the resource deletes the endpoint.",
  schemaVersion: 2,
  plural: 'webhookendpoints',
  singular: 'webhookendpoint',
  shortNames: ['athook'],
  spec: webhookEndpointSpecSchema,
  status: webhookEndpointStatusSchema,
  printerColumns: [
    { name: 'Tenant', type: 'string', jsonPath: '.spec.tenantId' },
    { name: 'Active', type: 'boolean', jsonPath: '.status.active' },
    { name: 'ID', type: 'string', jsonPath: '.status.id' },
    { name: 'Failures', type: 'integer', jsonPath: '.status.consecutiveFailures' },
    ...readyColumns,
    { name: 'URL', type: 'string', jsonPath: '.spec.url', priority: 1 },
    { name: 'Class', type: 'string', jsonPath: '.spec.controllerClass', priority: 1 },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};
