import { z } from 'zod';
import type { SecretBox } from './secretBox.ts';

/**
 * Custom request headers of an endpoint (docs/webhooks.md "Custom headers"): what a receiver behind a gateway
 * asks for, often a credential. Their values are sealed with the endpoint secrets' key and never shown
 * again; only their names are. Names the delivery itself uses, or that would change how the request is
 * framed or routed, are refused. Pure apart from the sealing it is given.
 */

export const CUSTOM_HEADERS_MAX = 10;
const NAME_MAX_LENGTH = 64;
const VALUE_MAX_LENGTH = 1024;

/** RFC 9110 field-name: a token. */
const NAME_PATTERN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible ASCII and inner spaces or tabs: no line breaks (header injection), nothing a proxy might rewrite. */
const VALUE_PATTERN = /^[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?$/;

/**
 * Names a delivery sets itself or that frame or route the request: the signatures, ids, timestamp and attempt
 * (ours and Standard Webhooks'), the content headers, the hop-by-hop ones, Host and User-Agent.
 */
const RESERVED_NAMES = new Set([
  'host',
  'user-agent',
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
]);
const RESERVED_PREFIXES = ['x-service-', 'webhook-', 'content-'];

/** Why `name` cannot be a custom header, or undefined when it can. */
export function headerNameProblem(name: string): string | undefined {
  if (name.length === 0 || name.length > NAME_MAX_LENGTH || !NAME_PATTERN.test(name)) {
    return `must be an HTTP header name (letters, digits and !#$%&'*+-.^_\`|~) of at most ${NAME_MAX_LENGTH} characters`;
  }
  const lower = name.toLowerCase();
  if (RESERVED_NAMES.has(lower) || RESERVED_PREFIXES.some((prefix) => lower.startsWith(prefix))) {
    return `is reserved: deliveries set it themselves, or it would change how the request is framed or routed (reserved: ${[...RESERVED_NAMES].join(', ')}, and names starting ${RESERVED_PREFIXES.join(', ')})`;
  }
  return undefined;
}

const headerValueSchema = z
  .string()
  .max(VALUE_MAX_LENGTH, `must be at most ${VALUE_MAX_LENGTH} characters`)
  .regex(VALUE_PATTERN, 'must be visible ASCII, with spaces or tabs only between other characters');

function checkNames(headers: Record<string, unknown>, ctx: z.RefinementCtx): void {
  const seen = new Set<string>();
  for (const name of Object.keys(headers)) {
    const problem = headerNameProblem(name);
    if (problem) ctx.addIssue({ code: 'custom', path: [name], message: problem });
    const lower = name.toLowerCase();
    if (seen.has(lower)) ctx.addIssue({ code: 'custom', path: [name], message: 'is given twice (header names are case-insensitive)' });
    seen.add(lower);
  }
}

/** At registration: the headers, name to value. */
export const customHeadersSchema = z
  .record(z.string(), headerValueSchema)
  .superRefine(checkNames)
  .refine((headers) => Object.keys(headers).length <= CUSTOM_HEADERS_MAX, `must have at most ${CUSTOM_HEADERS_MAX} headers`)
  .meta({
    description: `Headers every delivery carries, name to value (at most ${CUSTOM_HEADERS_MAX}). Values are stored encrypted and never returned.`,
    example: { Authorization: 'Bearer …', 'X-Team': 'compliance' },
  });

/** In a change: a value sets or replaces the header, null removes it; headers not named stay as they are. */
export const customHeaderChangesSchema = z
  .record(z.string(), headerValueSchema.nullable())
  .superRefine(checkNames)
  .meta({ description: 'Sets (a value) or removes (null) the headers named; the others are kept. Values are never returned.' });

/** An endpoint's headers as a delivery sends them, in the order they were given. */
export type CustomHeaders = ReadonlyArray<readonly [name: string, value: string]>;

/**
 * The headers after `changes`: each named one set or removed (matched case-insensitively, and taking the
 * name as newly written), the others kept in their place. Undefined when more than the maximum would remain.
 */
export function applyHeaderChanges(current: CustomHeaders, changes: Readonly<Record<string, string | null>>): CustomHeaders | undefined {
  const next = [...current];
  for (const [name, value] of Object.entries(changes)) {
    const at = next.findIndex(([existing]) => existing.toLowerCase() === name.toLowerCase());
    if (value === null) {
      if (at >= 0) next.splice(at, 1);
    } else if (at >= 0) next[at] = [name, value];
    else next.push([name, value]);
  }
  return next.length <= CUSTOM_HEADERS_MAX ? next : undefined;
}

/** The stored form: NULL for none (migration 029's constraint), else names and values together, sealed. */
export function sealHeaders(box: SecretBox, headers: CustomHeaders): Buffer | null {
  return headers.length === 0 ? null : box.seal(JSON.stringify(headers));
}

export function openHeaders(box: SecretBox, sealed: Buffer | null): CustomHeaders {
  return sealed === null ? [] : (JSON.parse(box.open(sealed)) as Array<[string, string]>);
}
