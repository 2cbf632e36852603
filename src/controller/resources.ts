import { z } from 'zod';
import { SCOPES } from '../auth/scopes.ts';
import { TENANT_ID_PATTERN } from '../events/eventFields.ts';
import { DNS_LABEL_MAX_LENGTH, DNS_LABEL_PATTERN, DNS_SUBDOMAIN_MAX_LENGTH, DNS_SUBDOMAIN_PATTERN } from '../platform/kubernetesNames.ts';
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

/**
 * The custom resources of the `audittrail.dev` group: one zod definition per spec and status, used by the
 * controller to read objects and by scripts/generate-crds.ts to write the CRD schemas in crds/, so that
 * what the API server admits and what the controller accepts cannot drift apart. Limits come from the same
 * constants the public API validates with.
 */

export const GROUP = 'audittrail.dev';
export const VERSION = 'v1alpha1';

/** The controller class of a resource without spec.controllerClass, and of a controller without CONTROLLER_CLASS. */
export const DEFAULT_CONTROLLER_CLASS = 'default';
/**
 * Set by the user to a new value (any string) to ask for a new key, or a new signing secret, in the
 * resource's Secret; the value handled last is kept in status.rotateRequest so that it acts once.
 */
export const ROTATE_ANNOTATION = 'audittrail.dev/rotate';
/**
 * Set to a new value to enable again the endpoint of a WebhookEndpoint that was disabled automatically (after
 * failed deliveries): the same endpoint, id and secret, its failure count at 0. Acts once per value.
 */
export const ENABLE_ANNOTATION = 'audittrail.dev/enable';
/**
 * The deployment (its database's id, see src/db/deploymentIdentity.ts) whose controller owns the resource:
 * written once by the first controller that reconciles it; any other deployment leaves the resource alone.
 */
export const DEPLOYMENT_ANNOTATION = 'audittrail.dev/deployment-id';
/**
 * On every CRD (scripts/generate-crds.ts): the version of its kind's schema. The controller refuses to
 * reconcile a kind whose installed CRD carries a lower one, or none (src/controller/crdGuard.ts): the API
 * server would prune the fields the controller writes and the installed schema does not know.
 */
export const SCHEMA_VERSION_ANNOTATION = 'audittrail.dev/schema-version';

const KEY_DESCRIPTION_MAX_LENGTH = 500;
const CIDRS_MAX = 50;

/** A Secret name: a DNS-1123 subdomain. */
const secretName = z
  .string()
  .min(1)
  .max(DNS_SUBDOMAIN_MAX_LENGTH)
  .regex(DNS_SUBDOMAIN_PATTERN)
  .meta({ description: 'Secret in the same namespace that receives the key (or signing secret); created and owned by the controller.' });

/** A controller class: a DNS-1123 label, like the release names it usually mirrors. */
export const controllerClass = z
  .string()
  .min(1)
  .max(DNS_LABEL_MAX_LENGTH)
  .regex(DNS_LABEL_PATTERN)
  .optional()
  .meta({
    description: `The controller class that reconciles this resource (the controller's CONTROLLER_CLASS, Helm value controller.class); absent means "${DEFAULT_CONTROLLER_CLASS}". Immutable.`,
  });

/** Absent and "default" are the same class, so adding the default explicitly is not a change. */
export const controllerClassImmutable = {
  rule: `(has(self.controllerClass) ? self.controllerClass : '${DEFAULT_CONTROLLER_CLASS}') == (has(oldSelf.controllerClass) ? oldSelf.controllerClass : '${DEFAULT_CONTROLLER_CLASS}')`,
  message: 'controllerClass is immutable; create another resource for another controller class',
};

export const tenantId = z
  .string()
  .regex(TENANT_ID_PATTERN)
  .meta({ description: 'Tenant whose trail the key reads or the endpoint receives. Immutable.' });

export const apiKeySpecSchema = z
  .object({
    tenantId,
    scopes: z
      .array(z.enum(SCOPES))
      .min(1)
      .max(SCOPES.length)
      .meta({ description: 'Scopes granted to the key.', 'x-kubernetes-list-type': 'set' }),
    allowedCidrs: z
      .array(
        z
          .string()
          .max(64)
          .meta({ 'x-kubernetes-validations': [{ rule: 'isCIDR(self) || isIP(self)', message: 'must be an IP address or CIDR range' }] }),
      )
      .max(CIDRS_MAX)
      .optional()
      .meta({
        description: "Client addresses allowed to use the key (the customer's egress ranges); empty means any.",
        'x-kubernetes-list-type': 'set',
      }),
    description: z.string().max(KEY_DESCRIPTION_MAX_LENGTH).optional(),
    revoked: z.boolean().optional().meta({ description: 'true revokes the key (for good: a revoked key is never restored).' }),
    secretName,
    controllerClass,
  })
  .meta({
    'x-kubernetes-validations': [
      { rule: 'self.tenantId == oldSelf.tenantId', message: 'tenantId is immutable; create another ApiKey' },
      { rule: 'self.secretName == oldSelf.secretName', message: 'secretName is immutable' },
      {
        rule: '!has(oldSelf.revoked) || !oldSelf.revoked || (has(self.revoked) && self.revoked)',
        message: 'a revoked key cannot be restored; create another ApiKey',
      },
      controllerClassImmutable,
    ],
  });

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

/** metav1.Condition. */
const conditionSchema = z.object({
  type: z.string().max(316),
  status: z.enum(['True', 'False', 'Unknown']),
  observedGeneration: z.int().min(0).optional(),
  lastTransitionTime: z.string().meta({ format: 'date-time' }),
  reason: z.string().max(1024),
  message: z.string().max(32768),
});

export const conditions = z
  .array(conditionSchema)
  .optional()
  .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] });

const rotateRequest = z
  .string()
  .optional()
  .meta({ description: `The ${ROTATE_ANNOTATION} annotation value handled last.` });

const apiKeyStatusSchema = z.object({
  lookupId: z.string().optional().meta({ description: 'The 8-hex lookup segment of the key (never the key itself).' }),
  state: z.enum(['Active', 'Revoked']).optional(),
  rotateRequest,
  observedGeneration: z.int().min(0).optional(),
  conditions,
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

export type ApiKeySpec = z.output<typeof apiKeySpecSchema>;
export type WebhookEndpointSpec = z.output<typeof webhookEndpointSpecSchema>;

export interface ResourceKind {
  readonly kind: string;
  /** What the kind is, for `kubectl explain <kind>`: the CRD schema's top-level description. */
  readonly description: string;
  /**
   * Raised by one with every change of the spec or status schema (a field, a limit, a validation rule):
   * written into the CRD as SCHEMA_VERSION_ANNOTATION, and the least version this controller runs against.
   * test/controller/crds.test.ts pins each version's schema, so a change without a raise fails there.
   */
  readonly schemaVersion: number;
  readonly plural: string;
  readonly singular: string;
  readonly shortNames: readonly string[];
  readonly spec: z.ZodType;
  readonly status: z.ZodType;
  readonly printerColumns: ReadonlyArray<{ name: string; type: string; jsonPath: string; description?: string; priority?: number }>;
}

/** Beside each kind's own columns: what kubectl get shows of the Ready condition (kstatus). */
export const readyColumns = [
  { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
  { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason' },
];

export const API_KEY: ResourceKind = {
  kind: 'ApiKey',
  description:
    'An API key of the audit trail for one tenant, with its scopes and client allow-list. The controller mints it once into the Secret spec.secretName (the service keeps only its hash), applies changes in place, rotates it on the audittrail.dev/rotate annotation and revokes it on spec.revoked or when the resource is deleted.',
  schemaVersion: 2,
  plural: 'apikeys',
  singular: 'apikey',
  shortNames: ['atkey'],
  spec: apiKeySpecSchema,
  status: apiKeyStatusSchema,
  printerColumns: [
    { name: 'Tenant', type: 'string', jsonPath: '.spec.tenantId' },
    { name: 'State', type: 'string', jsonPath: '.status.state' },
    { name: 'Lookup', type: 'string', jsonPath: '.status.lookupId', description: 'The key lookup id' },
    ...readyColumns,
    { name: 'Scopes', type: 'string', jsonPath: '.spec.scopes', priority: 1 },
    { name: 'Class', type: 'string', jsonPath: '.spec.controllerClass', priority: 1 },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};

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
