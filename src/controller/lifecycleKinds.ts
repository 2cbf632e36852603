import { z } from 'zod';
import { RETENTION_PERIOD_PATTERN } from '../config/valueFormats.ts';
import { WEBHOOK_FILTER_ENTRY_MAX_LENGTH, WEBHOOK_FILTER_ENTRY_PATTERN, WEBHOOK_FILTER_MAX_ENTRIES } from '../webhooks/webhookRules.ts';
import { conditions, controllerClass, controllerClassImmutable, readyColumns, tenantId, type ResourceKind } from './resources.ts';

/**
 * The data-lifecycle kinds of the audittrail.dev group (docs/retention.md), beside the kinds of
 * resources.ts and generated into crds/ the same way.
 */

const retain = z
  .string()
  .max(8)
  .regex(RETENTION_PERIOD_PATTERN)
  .meta({ description: "How long the tenant's events are kept: days, months or years, such as 30d, 18mo or 6y (at most 100 years)." });

export const retentionPolicySpecSchema = z
  .object({
    tenantId: tenantId.meta({ description: 'Tenant whose events the policy keeps. Immutable.' }),
    retain,
    locked: z.boolean().optional().meta({
      description:
        'true locks the policy: from then on it can be lengthened, never shortened, unlocked or deleted (the controller refuses, and the locked period goes on applying).',
    }),
    archive: z
      .object({
        bucket: z.string().min(3).max(63).meta({ description: 'S3 bucket the expiring events are archived to before they are removed.' }),
        prefix: z
          .string()
          .max(512)
          .optional()
          .meta({ description: 'Key prefix of the archive objects: <prefix>/<tenant>/<yyyy>/<mm>/<first>_<last>_<random>.ndjson.gz.' }),
      })
      .optional()
      .meta({
        description:
          'Archive before expiry: each expiring range (at most 50,000 events) is first written to this bucket as NDJSON.gz in the ' +
          'export-with-proofs form (each event with its inclusion proof and signed tree head), read back and compared, and only then ' +
          'expired. A failed write or read-back expires nothing more of the tenant in that pass and shows as Ready=False, reason ' +
          "ArchiveFailing. The store and its keys are the deployment's (ARCHIVE_S3_*); docs/retention.md.",
      }),
    controllerClass,
  })
  .meta({
    'x-kubernetes-validations': [
      { rule: 'self.tenantId == oldSelf.tenantId', message: 'tenantId is immutable; create another RetentionPolicy' },
      controllerClassImmutable,
    ],
  });

const retentionPolicyStatusSchema = z.object({
  enforced: z
    .string()
    .optional()
    .meta({ description: 'The period in force for the tenant (a locked one stays when a change is refused).' }),
  locked: z.boolean().optional().meta({ description: 'Whether the period in force is locked.' }),
  observedGeneration: z.int().min(0).optional(),
  conditions,
});

export type RetentionPolicySpec = z.output<typeof retentionPolicySpecSchema>;

export const RETENTION_POLICY: ResourceKind = {
  kind: 'RetentionPolicy',
  description:
    "How long one tenant's audit events are kept. Retention removes the events past that period (archiving them first when spec.archive asks) unless a LegalHold covers them; a locked policy can only be lengthened.",
  // 2: spec.archive's description says what archiving does (1 said it was not performed) and prefix has one.
  // Descriptions only, but kubectl explain reads them from the installed CRD, so an upgrade brings the true one.
  schemaVersion: 2,
  plural: 'retentionpolicies',
  singular: 'retentionpolicy',
  shortNames: ['atretain'],
  spec: retentionPolicySpecSchema,
  status: retentionPolicyStatusSchema,
  printerColumns: [
    { name: 'Tenant', type: 'string', jsonPath: '.spec.tenantId' },
    { name: 'Retain', type: 'string', jsonPath: '.spec.retain' },
    { name: 'Enforced', type: 'string', jsonPath: '.status.enforced', description: 'The period in force' },
    { name: 'Locked', type: 'boolean', jsonPath: '.status.locked' },
    ...readyColumns,
    { name: 'Class', type: 'string', jsonPath: '.spec.controllerClass', priority: 1 },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};

const instant = (description: string) =>
  z
    .string()
    .max(64)
    .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/)
    .optional()
    .meta({ description });

/** Everything of a hold is fixed once placed: a different hold is another resource. */
const holdImmutable = { rule: 'self == oldSelf', message: 'a legal hold cannot change; create another LegalHold and delete this one' };

export const legalHoldSpecSchema = z
  .object({
    tenantId: tenantId.meta({ description: 'Tenant whose events the hold keeps.' }),
    since: instant('Events at or after this instant (RFC 3339) are held; absent: from the first.'),
    until: instant('Events before this instant (RFC 3339) are held; absent: up to the last, including those still to come.'),
    actionPrefixes: z
      .array(z.string().max(WEBHOOK_FILTER_ENTRY_MAX_LENGTH).regex(WEBHOOK_FILTER_ENTRY_PATTERN))
      .max(WEBHOOK_FILTER_MAX_ENTRIES)
      .optional()
      .meta({ description: 'Action families held, as webhook filters take them (phi. or phi.read); absent or empty: every action.' }),
    reason: z.string().min(1).max(500).meta({ description: 'Why the events are held (shown to auditors in the trail).' }),
    reference: z.string().min(1).max(200).meta({ description: 'The matter, case or ticket the hold is for.' }),
    controllerClass,
  })
  .meta({
    'x-kubernetes-validations': [
      holdImmutable,
      {
        rule: '!has(self.since) || !has(self.until) || timestamp(self.since) < timestamp(self.until)',
        message: 'since must be before until',
      },
    ],
  });

const legalHoldStatusSchema = z.object({
  holdId: z.string().optional().meta({ description: 'The hold as the service knows it (audit-trail holds list).' }),
  placedAt: z.string().optional().meta({ format: 'date-time' }),
  observedGeneration: z.int().min(0).optional(),
  conditions,
});

export type LegalHoldSpec = z.output<typeof legalHoldSpecSchema>;

export const LEGAL_HOLD: ResourceKind = {
  kind: 'LegalHold',
  description:
    "A legal hold on one tenant's audit events: while it stands, retention removes none of the events it covers. Deleting the resource releases the hold, recorded in the tenant's trail.",
  schemaVersion: 1,
  plural: 'legalholds',
  singular: 'legalhold',
  shortNames: ['athold'],
  spec: legalHoldSpecSchema,
  status: legalHoldStatusSchema,
  printerColumns: [
    { name: 'Tenant', type: 'string', jsonPath: '.spec.tenantId' },
    { name: 'Reference', type: 'string', jsonPath: '.spec.reference' },
    { name: 'Since', type: 'string', jsonPath: '.spec.since' },
    { name: 'Until', type: 'string', jsonPath: '.spec.until' },
    ...readyColumns,
    { name: 'Hold', type: 'string', jsonPath: '.status.holdId', priority: 1 },
    { name: 'Class', type: 'string', jsonPath: '.spec.controllerClass', priority: 1 },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};
