import { z } from 'zod';
import { RETENTION_PERIOD_PATTERN } from '../config/valueFormats.ts';
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
        prefix: z.string().max(512).optional(),
      })
      .optional()
      .meta({
        description:
          'Archive before expiry (not performed by this version: while it is set, nothing of the tenant expires, so nothing is removed unarchived).',
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
  schemaVersion: 1,
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
