import { z } from 'zod';
import { parseTimestampCeilMs } from '../events/eventFields.ts';
import { DEFAULT_OCSF_VERSION, OCSF_VERSIONS, type OcsfVersion } from './ocsf.ts';
import {
  WEBHOOK_FILTER_ENTRY_MAX_LENGTH,
  WEBHOOK_FILTER_ENTRY_PATTERN,
  WEBHOOK_URL_MAX_LENGTH,
  webhookUrlProblem,
  type WebhookUrlPolicy,
} from '../webhooks/webhookRules.ts';
import { systemClock } from '../platform/clock.ts';

/**
 * What a log stream may be (docs/streams.md): the destination of each type, the format, the filter and the
 * start. The public API and the AuditLogStream custom resource validate with these rules, and the CRD
 * schema is generated from the constants here.
 */

/** `str_` + 32 lowercase hex. */
export const STREAM_ID_PATTERN = /^str_[0-9a-f]{32}$/;
export const STREAMS_PER_TENANT = 20;
export const STREAM_FILTER_MAX_ENTRIES = 50;
const LABEL_MAX_LENGTH = 256;
const SECRET_MAX_LENGTH = 512;
const TAGS_MAX = 50;

export const DESTINATION_TYPES = ['splunk_hec', 'datadog', 'https', 's3', 'amqp'] as const;
export type DestinationType = (typeof DESTINATION_TYPES)[number];
export const STREAM_FORMATS = ['native', 'ocsf'] as const;
/** How an https destination frames a batch's records: lines of NDJSON, or one JSON array. */
const HTTPS_BODIES = ['ndjson', 'json'] as const;
export type StreamFormat = (typeof STREAM_FORMATS)[number];

/** A destination URL: the webhook rules (https, no credentials, no fragment), and for a base URL no query either. */
function destinationUrl(policy: WebhookUrlPolicy, what: string) {
  return z
    .string()
    .superRefine((value, ctx) => {
      const problem = webhookUrlProblem(value, policy);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
      else if (new URL(value).search !== '') ctx.addIssue({ code: 'custom', message: 'must not contain a query string' });
    })
    .meta({ description: what });
}

/**
 * An AMQP 0-9-1 broker: `amqps://host[:port][/vhost]` (`amqp://` only where plain http is allowed), the
 * credentials in members of their own, never in the URL (it is shown by the API and logged).
 */
function brokerUrl(policy: WebhookUrlPolicy) {
  return z
    .string()
    .max(WEBHOOK_URL_MAX_LENGTH)
    .superRefine((value, ctx) => {
      const problem = brokerUrlProblem(value, policy);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .meta({ description: 'The broker, amqps://host[:port][/vhost] (5671 by default; the vhost percent-encoded, absent: "/").' });
}

function brokerUrlProblem(value: string, policy: WebhookUrlPolicy): string | undefined {
  if (!URL.canParse(value)) return 'must be an absolute URL';
  const url = new URL(value);
  const schemes = policy.allowHttp ? ['amqps:', 'amqp:'] : ['amqps:'];
  if (!schemes.includes(url.protocol)) return policy.allowHttp ? 'must use amqps or amqp' : 'must use amqps';
  if (url.username !== '' || url.password !== '') return 'must not contain credentials: give username and password';
  if (url.hostname === '') return 'must name a host';
  if (url.search !== '' || url.hash !== '') return 'must not contain a query or a fragment';
  if (url.port === '0') return 'must not use port 0';
  if (url.pathname.length > 1 && url.pathname.slice(1).includes('/')) return 'must name at most one vhost (percent-encode a / in it)';
  return undefined;
}

/** AMQP exchange names and routing keys are short strings of at most 255 bytes. */
const AMQP_NAME = /^[A-Za-z0-9_.:-]{1,255}$/;

const secret = (what: string) =>
  z
    .string()
    .min(1)
    .max(SECRET_MAX_LENGTH)
    .meta({ description: `${what} Write-only: never returned.` });
/**
 * A secret the destination receives in an HTTP header (HEC token, Datadog API key, S3 keys, which sign the
 * Authorization header): header values are bytes of visible ASCII, and one outside it made every batch fail
 * in the HTTP client, long after the stream was accepted. Refused at the door instead, without echoing it.
 */
const HEADER_SAFE = /^[\x21-\x7e]+$/;
const HEADER_SAFE_PROBLEM = 'must be printable ASCII without spaces: it is sent in an HTTP header';
const headerSecret = (what: string) => secret(what).regex(HEADER_SAFE, HEADER_SAFE_PROBLEM);
const label = (what: string) => z.string().min(1).max(LABEL_MAX_LENGTH).optional().meta({ description: what });

/** S3 bucket names: 3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit. */
const BUCKET_PATTERN = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
/** A key prefix: path segments of safe characters, no leading or trailing slash, no `.` or `..` segment. */
const PREFIX_PATTERN = /^(?!.*(^|\/)\.{1,2}(\/|$))[A-Za-z0-9!_.*'()-]+(\/[A-Za-z0-9!_.*'()-]+)*$/;
const REGION_PATTERN = /^[a-z]{2}(-[a-z0-9]+)+-\d+$|^[a-z0-9-]{1,32}$/;

export function destinationSchema(policy: WebhookUrlPolicy) {
  return z.discriminatedUnion('type', [
    z.strictObject({
      type: z.literal('splunk_hec'),
      url: destinationUrl(
        policy,
        'The HTTP Event Collector base, e.g. https://splunk.example.com:8088; events go to /services/collector/event under it.',
      ),
      token: headerSecret('The HEC token, sent as Authorization: Splunk <token>.'),
      index: label('The index events go to; absent: the token’s default index.'),
      source: label('HEC source; default audit-trail.'),
      sourcetype: label('HEC sourcetype; default audit-trail:native or audit-trail:ocsf.'),
    }),
    z.strictObject({
      type: z.literal('datadog'),
      url: destinationUrl(
        policy,
        'The logs intake of your Datadog site, e.g. https://http-intake.logs.datadoghq.eu; logs go to /api/v2/logs under it.',
      ),
      api_key: headerSecret('The Datadog API key, sent as DD-API-KEY.'),
      service: label('The service attribute; default audit-trail.'),
      tags: z
        .array(
          z
            .string()
            .min(1)
            .max(200)
            .regex(/^[^,\s]+$/, 'must be a tag without commas or spaces, e.g. env:prod'),
        )
        .max(TAGS_MAX)
        .optional()
        .meta({ description: 'Tags added to every log (ddtags), e.g. env:prod.' }),
    }),
    z.strictObject({
      type: z.literal('https'),
      url: destinationUrl(policy, 'The collector: batches are POSTed to this URL, gzipped, signed like webhooks.'),
      body: z.enum(HTTPS_BODIES).optional().meta({
        description:
          'ndjson (the default): one record a line; json: one JSON array of the records, the payload the Standard Webhooks libraries parse by default.',
      }),
    }),
    z.strictObject({
      type: z.literal('amqp'),
      url: brokerUrl(policy),
      username: z.string().min(1).max(LABEL_MAX_LENGTH).meta({ description: 'The broker user.' }),
      password: secret('The broker user’s password.'),
      exchange: z
        .string()
        .regex(AMQP_NAME, 'must be an exchange name: letters, digits, - _ . :')
        .meta({ description: 'The exchange the records are published to; it must exist (it is never declared).' }),
      routing_key: z
        .string()
        .max(255)
        .regex(/^[A-Za-z0-9_.:{}-]*$/, 'must be a routing key of letters, digits, - _ . : and {tenant}')
        .optional()
        .meta({ description: 'The routing key of every record; {tenant} is replaced by the tenant id. Default audit.<format>.{tenant}.' }),
    }),
    z.strictObject({
      type: z.literal('s3'),
      bucket: z.string().regex(BUCKET_PATTERN, 'must be an S3 bucket name (3-63 lowercase letters, digits, dots, hyphens)'),
      prefix: z
        .string()
        .max(512)
        .regex(PREFIX_PATTERN, 'must be a key prefix of path segments, without leading or trailing slash')
        .meta({ description: 'Objects are written under <prefix>/<tenant>/yyyy/mm/dd/.' }),
      region: z.string().max(64).regex(REGION_PATTERN, 'must be a region name such as eu-west-1'),
      endpoint: destinationUrl(policy, 'An S3-compatible endpoint (MinIO, Ceph, R2...); absent: AWS S3 of the region.').optional(),
      access_key_id: z.string().min(1).max(256).regex(HEADER_SAFE, HEADER_SAFE_PROBLEM),
      secret_access_key: headerSecret('The secret access key.'),
      force_path_style: z.boolean().optional().meta({ description: 'Address the bucket in the path (most S3-compatible stores need it).' }),
    }),
  ]);
}

export type DestinationInput = z.output<ReturnType<typeof destinationSchema>>;

export const streamFilterSchema = z
  .strictObject({
    action_prefixes: z
      .array(
        z
          .string()
          .max(WEBHOOK_FILTER_ENTRY_MAX_LENGTH)
          .regex(WEBHOOK_FILTER_ENTRY_PATTERN, 'must be a dotted lowercase action such as phi.read or a prefix such as phi.'),
      )
      .max(STREAM_FILTER_MAX_ENTRIES)
      .optional()
      .meta({ description: 'Only events whose action starts with one of these; absent or empty: every action.' }),
    phi_involved: z.boolean().optional().meta({ description: 'Only PHI events (true) or only the others (false); absent: both.' }),
  })
  .meta({ id: 'StreamFilter' });

export type StreamFilter = z.output<typeof streamFilterSchema>;

/** "now", or a past RFC 3339 instant (a backfill); startAtMs reads it. */
export const startAtSchema = z
  .string()
  .superRefine((value, ctx) => {
    if (value === 'now') return;
    const ms = parseTimestampCeilMs(value);
    if (ms === undefined) ctx.addIssue({ code: 'custom', message: 'must be "now" or an RFC 3339 instant' });
    else if (ms > systemClock.now()) ctx.addIssue({ code: 'custom', message: 'must not be in the future: use "now"' });
  })
  .meta({ description: '"now" (the default), or a past instant: the stream first delivers the trail from there (a backfill).' });

/** A valid start_at as epoch milliseconds; undefined for "now" (or none). */
export function startAtMs(value: string | undefined): number | undefined {
  return value === undefined || value === 'now' ? undefined : parseTimestampCeilMs(value);
}

/** POST /audit/streams. Unknown fields are refused: a misspelt filter must not mean "every event". */
export function streamCreationSchema(policy: WebhookUrlPolicy) {
  return z
    .strictObject({
      destination: destinationSchema(policy),
      format: z.enum(STREAM_FORMATS).default('native'),
      ocsf_version: ocsfVersionSchema,
      filter: streamFilterSchema.optional(),
      start_at: startAtSchema.optional(),
      tree_heads: z
        .boolean()
        .default(true)
        .meta({ description: "Whether each batch carries the tenant's latest signed tree head (docs/streams.md)." }),
    })
    .superRefine((creation, ctx) => {
      if (creation.format !== 'ocsf' && creation.ocsf_version !== undefined)
        ctx.addIssue({ code: 'custom', path: ['ocsf_version'], message: 'only an ocsf stream has an OCSF version' });
    });
}

const ocsfVersionSchema = z
  .enum(OCSF_VERSIONS)
  .optional()
  .meta({
    description: `format ocsf only: the OCSF release of the records, ${DEFAULT_OCSF_VERSION} by default (1.3.0 for streams that need it).`,
  });

/** The OCSF release a stream of `format` emits: none for native; the one asked for, or else the default. */
export function streamOcsfVersion(format: StreamFormat, asked: OcsfVersion | undefined): OcsfVersion | null {
  return format === 'ocsf' ? (asked ?? DEFAULT_OCSF_VERSION) : null;
}

export type StreamCreation = z.output<ReturnType<typeof streamCreationSchema>>;

/** The filter as stored: prefixes deduplicated, absent members absent. */
export function normaliseFilter(filter: StreamFilter | undefined): StreamFilter {
  const prefixes = [...new Set(filter?.action_prefixes ?? [])];
  return {
    ...(prefixes.length > 0 ? { action_prefixes: prefixes } : {}),
    ...(filter?.phi_involved !== undefined ? { phi_involved: filter.phi_involved } : {}),
  };
}
