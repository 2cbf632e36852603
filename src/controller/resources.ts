import { z } from 'zod';
import { SCOPES } from '../auth/scopes.ts';
import { TENANT_ID_PATTERN } from '../events/eventFields.ts';
import { DNS_LABEL_MAX_LENGTH, DNS_LABEL_PATTERN, DNS_SUBDOMAIN_MAX_LENGTH, DNS_SUBDOMAIN_PATTERN } from '../platform/kubernetesNames.ts';

/**
 * The custom resources of the `audittrail.dev` group: one zod definition per spec and status, used by the
 * controller to read objects and by scripts/generate-crds.ts to write the CRD schemas in crds/, so that
 * what the API server admits and what the controller accepts cannot drift apart. Limits come from the same
 * constants the public API validates with. ApiKey and what the kinds share are here; WebhookEndpoint,
 * AuditLogStream and the lifecycle kinds have modules of their own (resourceKinds.ts lists them all).
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
export const secretName = z
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

export const rotateRequest = z
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

export type ApiKeySpec = z.output<typeof apiKeySpecSchema>;

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
