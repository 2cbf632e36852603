import { z } from 'zod';
import { TENANT_ID_PATTERN } from '../events/eventFields.ts';
import { DNS_SUBDOMAIN_MAX_LENGTH, DNS_SUBDOMAIN_PATTERN } from '../platform/kubernetesNames.ts';
import { DEFAULT_OCSF_VERSION, OCSF_VERSIONS } from '../streams/ocsf.ts';
import { DESTINATION_TYPES, STREAM_FILTER_MAX_ENTRIES, STREAM_FORMATS } from '../streams/streamRules.ts';
import { WEBHOOK_FILTER_ENTRY_MAX_LENGTH, WEBHOOK_FILTER_ENTRY_PATTERN, WEBHOOK_URL_MAX_LENGTH } from '../webhooks/webhookRules.ts';
import { conditions, controllerClass, controllerClassImmutable, readyColumns, type ResourceKind } from './resources.ts';

/**
 * The AuditLogStream custom resource (docs/streams.md, "Deployment-wide streams"): a log stream a platform
 * team declares for every tenant of the deployment or a list of them, its credentials in a Secret it names.
 * The destination's members are the public API's, in camelCase; the controller validates them with the API's
 * rules (streams/streamRules.ts), so only what a CRD schema can say cheaply is checked at admission here.
 */

/** The members each destination type reads from the Secret that secretRef names. */
export const STREAM_SECRET_KEYS = {
  splunk_hec: ['token'],
  datadog: ['apiKey'],
  https: ['signingSecret'],
  s3: ['accessKeyId', 'secretAccessKey'],
  amqp: ['password'],
} as const satisfies Record<(typeof DESTINATION_TYPES)[number], readonly string[]>;

const text = (what: string, max = 256) => z.string().min(1).max(max).optional().meta({ description: what });

export const auditLogStreamSpecSchema = z
  .object({
    allTenants: z
      .boolean()
      .optional()
      .meta({ description: "true: every tenant's trail, present and future. Exactly one of allTenants: true and tenantIds." }),
    tenantIds: z
      .array(z.string().regex(TENANT_ID_PATTERN))
      .min(1)
      .max(1000)
      .optional()
      .meta({ description: 'The tenants whose trails the stream delivers.', 'x-kubernetes-list-type': 'set' }),
    destination: z
      .object({
        type: z.enum(DESTINATION_TYPES),
        url: z.string().max(WEBHOOK_URL_MAX_LENGTH).optional().meta({
          description:
            'splunk_hec, datadog, https: the base URL or collector, as in the public API (public https only); amqp: the broker, amqps://host[:port][/vhost].',
        }),
        index: text('splunk_hec: the index.'),
        source: text('splunk_hec: the HEC source.'),
        sourcetype: text('splunk_hec: the HEC sourcetype.'),
        service: text('datadog: the service attribute.'),
        tags: z.array(z.string().min(1).max(200)).max(50).optional().meta({ description: 'datadog: tags added to every log.' }),
        bucket: text('s3: the bucket.', 63),
        prefix: text('s3: objects go under <prefix>/<tenant>/yyyy/mm/dd/.', 512),
        region: text('s3: the region.', 64),
        endpoint: text('s3: an S3-compatible endpoint; absent: AWS S3.', WEBHOOK_URL_MAX_LENGTH),
        forcePathStyle: z.boolean().optional().meta({ description: 's3: address the bucket in the path.' }),
        body: z.enum(['ndjson', 'json']).optional().meta({ description: 'https: ndjson (default) or json, one JSON array a batch.' }),
        username: text('amqp: the broker user.'),
        exchange: text('amqp: the exchange records are published to; it must exist.', 255),
        routingKey: text('amqp: the routing key, {tenant} replaced by the tenant id; default audit.<format>.{tenant}.', 255),
        secretRef: z
          .object({
            name: z.string().min(1).max(DNS_SUBDOMAIN_MAX_LENGTH).regex(DNS_SUBDOMAIN_PATTERN),
          })
          .meta({
            description:
              'A Secret in the same namespace holding the credentials: token (splunk_hec), apiKey (datadog), signingSecret (https), accessKeyId and secretAccessKey (s3), password (amqp). Changes to it are picked up.',
          }),
      })
      .meta({
        'x-kubernetes-validations': [
          {
            rule: "self.type == 's3' ? has(self.bucket) && has(self.prefix) && has(self.region) : has(self.url)",
            message: 's3 needs bucket, prefix and region; the other types need url',
          },
        ],
      }),
    format: z.enum(STREAM_FORMATS).optional().meta({ description: 'native (default) or ocsf.' }),
    ocsfVersion: z
      .enum(OCSF_VERSIONS)
      .optional()
      .meta({
        description: `format ocsf only: the OCSF release of the records; absent: ${DEFAULT_OCSF_VERSION}, or the release the stream already has.`,
      }),
    filter: z
      .object({
        actionPrefixes: z
          .array(z.string().max(WEBHOOK_FILTER_ENTRY_MAX_LENGTH).regex(WEBHOOK_FILTER_ENTRY_PATTERN))
          .max(STREAM_FILTER_MAX_ENTRIES)
          .optional(),
        phiInvolved: z.boolean().optional(),
      })
      .optional()
      .meta({ description: 'Only events of these actions (prefixes such as phi.) and of this PHI flag; absent: every event.' }),
    startAt: z.string().max(64).optional().meta({ description: '"now" (default) or a past RFC 3339 instant (a backfill). Immutable.' }),
    treeHeads: z
      .boolean()
      .optional()
      .meta({ description: "Whether each batch begins with the tenant's latest signed tree head (default true)." }),
    paused: z.boolean().optional().meta({ description: 'true pauses delivery; the position is kept.' }),
    controllerClass,
  })
  .meta({
    'x-kubernetes-validations': [
      {
        rule: '(has(self.allTenants) && self.allTenants) != has(self.tenantIds)',
        message: 'set either allTenants: true or tenantIds, not both',
      },
      {
        rule: "(has(self.startAt) ? self.startAt : 'now') == (has(oldSelf.startAt) ? oldSelf.startAt : 'now')",
        message: 'startAt is immutable; create another AuditLogStream',
      },
      controllerClassImmutable,
    ],
  });

const auditLogStreamStatusSchema = z.object({
  id: z.string().optional().meta({ description: 'The stream (str_…).' }),
  state: z.enum(['Active', 'Paused', 'Failing']).optional(),
  tenants: z.string().optional().meta({ description: 'The tenants covered, for kubectl get: "*" or a comma-separated list.' }),
  lagEvents: z.int().min(0).optional().meta({ description: 'Sealed events not yet delivered, over every tenant covered.' }),
  lastDeliveredAt: z.string().optional().meta({ format: 'date-time' }),
  lastError: z.string().optional().meta({ description: 'What the destination answered last time it did not accept a batch.' }),
  observedGeneration: z.int().min(0).optional(),
  conditions,
});

export type AuditLogStreamSpec = z.output<typeof auditLogStreamSpecSchema>;

export const AUDIT_LOG_STREAM: ResourceKind = {
  kind: 'AuditLogStream',
  description:
    'A deployment-wide log stream: every tenant\'s audit trail, or a list of tenants\', delivered to a SIEM (Splunk HEC, Datadog, an HTTPS collector, S3 or an AMQP broker) with credentials from a Secret labelled audittrail.dev/stream-credentials: "true". Deleting the resource deletes the stream.',
  schemaVersion: 2,
  plural: 'auditlogstreams',
  singular: 'auditlogstream',
  shortNames: ['atstream'],
  spec: auditLogStreamSpecSchema,
  status: auditLogStreamStatusSchema,
  printerColumns: [
    { name: 'Tenant', type: 'string', jsonPath: '.status.tenants' },
    { name: 'Destination', type: 'string', jsonPath: '.spec.destination.type' },
    { name: 'State', type: 'string', jsonPath: '.status.state' },
    { name: 'Lag', type: 'integer', jsonPath: '.status.lagEvents', description: 'Sealed events not yet delivered' },
    ...readyColumns,
    { name: 'ID', type: 'string', jsonPath: '.status.id', priority: 1 },
    { name: 'Class', type: 'string', jsonPath: '.spec.controllerClass', priority: 1 },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};
