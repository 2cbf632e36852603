import { z } from 'zod';
import { ACTION_MAX_LENGTH } from '../events/eventFields.ts';
import { customHeaderChangesSchema, customHeadersSchema } from './customHeaders.ts';
import { payloadFilterSchema } from './payloadFilter.ts';

/**
 * What a webhook endpoint may be (docs/webhooks.md "Registering an endpoint"). The public API and the WebhookEndpoint custom
 * resource validate with these same rules, and the CRD schema is generated from the constants here.
 */

export const WEBHOOK_URL_MAX_LENGTH = 2048;
export const WEBHOOK_DESCRIPTION_MAX_LENGTH = 500;
export const WEBHOOK_FILTER_MAX_ENTRIES = 50;
export const WEBHOOK_FILTER_ENTRY_MAX_LENGTH = ACTION_MAX_LENGTH;
export const WEBHOOKS_PER_TENANT = 100;

/** An action (`phi.read`) or a family prefix ending in a dot (`phi.`). */
export const WEBHOOK_FILTER_ENTRY_PATTERN = /^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*\.?$/;

/** `wh_` + 32 lowercase hex. */
export const WEBHOOK_ID_PATTERN = /^wh_[0-9a-f]{32}$/;

export interface WebhookUrlPolicy {
  /** WEBHOOK_ALLOW_HTTP: plain http targets, for development and tests only. */
  readonly allowHttp: boolean;
}

/** Why a URL is not an acceptable delivery target (before any address check), or undefined when it is. */
export function webhookUrlProblem(value: string, policy: WebhookUrlPolicy): string | undefined {
  if (value.length > WEBHOOK_URL_MAX_LENGTH) return `must be at most ${WEBHOOK_URL_MAX_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an absolute URL';
  }
  // The stored form is the normalised one (percent-encoding and punycode can make it longer).
  if (url.href.length > WEBHOOK_URL_MAX_LENGTH) return `must be at most ${WEBHOOK_URL_MAX_LENGTH} characters once normalised`;
  const schemes = policy.allowHttp ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) return policy.allowHttp ? 'must use https or http' : 'must use https';
  // Credentials in a URL end up in logs and proxies; receivers authenticate us by the signature instead.
  if (url.username !== '' || url.password !== '') return 'must not contain credentials';
  if (url.hash !== '') return 'must not contain a fragment';
  // Port 0 is no port: connecting to it fails or, on some stacks, lands on whatever the OS picks.
  if (url.port === '0') return 'must not use port 0';
  return undefined;
}

/**
 * The form a target URL is stored, returned and compared in: the WHATWG serialisation, in which an address
 * has one spelling (`[::127.0.0.1]` is `[::7f00:1]`, `0x7f.1` is `127.0.0.1`), the host is lower case and
 * the default port and dot segments are gone. What is stored is what the guard judged and what is dialled.
 * A value that is no URL at all is returned as given, for validation to report.
 */
export function normaliseWebhookUrl(value: string): string {
  return URL.canParse(value) ? new URL(value).href : value;
}

function webhookUrlSchema(policy: WebhookUrlPolicy) {
  return z.string().superRefine((value, ctx) => {
    const problem = webhookUrlProblem(value, policy);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });
}

const eventFilterSchema = z
  .array(
    z
      .string()
      .max(WEBHOOK_FILTER_ENTRY_MAX_LENGTH, `must be at most ${WEBHOOK_FILTER_ENTRY_MAX_LENGTH} characters`)
      .regex(WEBHOOK_FILTER_ENTRY_PATTERN, 'must be a dotted lowercase action such as phi.read or a prefix such as phi.'),
  )
  .max(WEBHOOK_FILTER_MAX_ENTRIES, `must have at most ${WEBHOOK_FILTER_MAX_ENTRIES} entries`);

/** Repeated entries mean nothing more; the stored filter holds each once, in first-seen order. */
export function normaliseEventFilter(entries: readonly string[]): string[] {
  return [...new Set(entries)];
}

const webhookDescriptionSchema = z
  .string()
  .max(WEBHOOK_DESCRIPTION_MAX_LENGTH, `must be at most ${WEBHOOK_DESCRIPTION_MAX_LENGTH} characters`);

/** The signatures a delivery may carry (docs/webhooks.md "Ed25519 signatures"): HMAC (v1) and Ed25519 (v1a). */
export const SIGNATURE_SCHEMES = ['hmac', 'ed25519'] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];

/** What an endpoint receives: the trail's events, or the service's operational notices (docs/webhooks.md "Operational events"). */
export const ENDPOINT_KINDS = ['events', 'operational'] as const;
export type EndpointKind = (typeof ENDPOINT_KINDS)[number];

/** Per-endpoint delivery settings (docs/webhooks.md "Delivery settings"); absent or null means the service's default. */
export const MAX_TIMEOUT_S = 30;
/** At most eight attempts: seven delays. */
export const MAX_RETRY_DELAYS = 7;
/** One delay at most a day, all of them together at most three days: how long receivers must remember ids. */
export const MAX_RETRY_DELAY_S = 86_400;
const MAX_RETRY_SCHEDULE_TOTAL_S = 3 * 86_400;
export const MAX_RATE_LIMIT_PER_S = 1_000;

const timeoutSchema = z
  .int()
  .min(1)
  .max(MAX_TIMEOUT_S)
  .meta({
    description: `Seconds a receiver has to answer an attempt, 1 to ${MAX_TIMEOUT_S}; the service's default (10) when absent or null.`,
  });
const retryScheduleSchema = z
  .array(z.int().min(1).max(MAX_RETRY_DELAY_S))
  .max(MAX_RETRY_DELAYS)
  .refine(
    (delays) => delays.reduce((sum, delay) => sum + delay, 0) <= MAX_RETRY_SCHEDULE_TOTAL_S,
    `the delays must add up to at most ${MAX_RETRY_SCHEDULE_TOTAL_S} seconds (three days)`,
  )
  .meta({
    description: `Seconds between a failed attempt and the next, each varied by ±20 %: up to ${MAX_RETRY_DELAYS} delays (${MAX_RETRY_DELAYS + 1} attempts), each at most a day, together at most three days; [] makes one attempt only. The service's schedule (60, 300, 1800, 7200) when absent or null.`,
    example: [10, 60, 600],
  });
const rateLimitSchema = z
  .int()
  .min(1)
  .max(MAX_RATE_LIMIT_PER_S)
  .meta({ description: `Deliveries per second at most, over every worker of the service; none when absent or null.` });
const orderedSchema = z.boolean().meta({
  description:
    'One delivery at a time, in the order the events were written: the next only after the one before succeeded or failed for good.',
});
const signatureSchemesSchema = z
  .array(z.enum(SIGNATURE_SCHEMES))
  .min(1)
  .refine((schemes) => new Set(schemes).size === schemes.length, 'must not repeat a scheme')
  .meta({ description: 'The signatures deliveries carry: hmac (v1, the default), ed25519 (v1a), or both.' });

/** The settings a registration and a change share, each optional. */
const endpointOptions = {
  payload_filter: payloadFilterSchema.nullable().optional(),
  timeout_s: timeoutSchema.nullable().optional(),
  retry_schedule_s: retryScheduleSchema.nullable().optional(),
  rate_limit_per_s: rateLimitSchema.nullable().optional(),
  ordered: orderedSchema.optional(),
  signature_schemes: signatureSchemesSchema.optional(),
};

/** POST /audit/webhooks body. Unknown fields are refused: a misspelt `event_filters` must not mean "all events". */
export function webhookRegistrationSchema(policy: WebhookUrlPolicy) {
  return z.strictObject({
    url: webhookUrlSchema(policy),
    event_filter: eventFilterSchema.default([]),
    description: webhookDescriptionSchema.default(''),
    kind: z
      .enum(ENDPOINT_KINDS)
      .default('events')
      .meta({ description: "events (default): the trail's events; operational: the service's notices about your endpoints and streams." }),
    headers: customHeadersSchema.optional(),
    ...endpointOptions,
  });
}

export type WebhookRegistration = z.output<ReturnType<typeof webhookRegistrationSchema>>;

/**
 * PATCH /audit/webhooks/{id} body: the fields to change, each as a registration takes it; null returns a
 * setting to its default (removes the payload filter), and `headers` sets or removes the headers it names.
 * The kind is fixed at registration.
 */
export function webhookChangesSchema(policy: WebhookUrlPolicy) {
  return z.strictObject({
    url: webhookUrlSchema(policy).optional(),
    event_filter: eventFilterSchema.optional(),
    description: webhookDescriptionSchema.optional(),
    headers: customHeaderChangesSchema.optional(),
    ...endpointOptions,
  });
}

export type WebhookChanges = z.output<ReturnType<typeof webhookChangesSchema>>;

/** How long a rotated-out secret keeps signing beside the new one (docs/webhooks.md): one day unless asked. */
export const DEFAULT_ROTATION_OVERLAP_S = 86_400;
/** At most a week: two secrets valid for longer is a leak waiting to be used. */
export const MAX_ROTATION_OVERLAP_S = 604_800;

/** The body of POST /audit/webhooks/{id}/rotate-secret; an absent body means every default. */
export const secretRotationSchema = z.strictObject({
  overlap_s: z
    .int()
    .min(0)
    .max(MAX_ROTATION_OVERLAP_S)
    .default(DEFAULT_ROTATION_OVERLAP_S)
    .meta({
      description: `Seconds the replaced secret keeps signing beside the new one (default ${DEFAULT_ROTATION_OVERLAP_S}; 0 retires it at once).`,
    }),
});
