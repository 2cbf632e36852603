import { z } from 'zod';
import { ACTION_MAX_LENGTH } from '../events/eventFields.ts';

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

export function webhookUrlSchema(policy: WebhookUrlPolicy) {
  return z.string().superRefine((value, ctx) => {
    const problem = webhookUrlProblem(value, policy);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });
}

export const eventFilterSchema = z
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

export const webhookDescriptionSchema = z
  .string()
  .max(WEBHOOK_DESCRIPTION_MAX_LENGTH, `must be at most ${WEBHOOK_DESCRIPTION_MAX_LENGTH} characters`);

/** POST /audit/webhooks body. Unknown fields are refused: a misspelt `event_filters` must not mean "all events". */
export function webhookRegistrationSchema(policy: WebhookUrlPolicy) {
  return z.strictObject({
    url: webhookUrlSchema(policy),
    event_filter: eventFilterSchema.default([]),
    description: webhookDescriptionSchema.default(''),
  });
}

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
