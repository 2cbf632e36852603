import { readFileSync } from 'node:fs';
import type { AuditTrailClient } from '../auditTrailClient.ts';
import type { SignatureScheme, WebhookChanges, WebhookEndpoint } from '../webhookShapes.ts';
import { countFlag } from './commandOptions.ts';
import { printable } from './tableOutput.ts';
import { UsageError } from './usage.ts';

/**
 * `audit-trail-client webhooks update|enable|disable|public-keys`: an endpoint's settings changed in place
 * (docs/webhooks.md "Changing an endpoint"), and its state. Each prints one line for a person or, with
 * `--output json`, the API's answer.
 */

/** The options of `update`; each one given becomes a field of the change, the others are left as they are. */
export const SETTINGS_OPTIONS = {
  'endpoint-url': { type: 'string' },
  'event-filter': { type: 'string' },
  description: { type: 'string' },
  'payload-filter': { type: 'string' },
  timeout: { type: 'string' },
  'retry-schedule': { type: 'string' },
  'rate-limit': { type: 'string' },
  ordered: { type: 'boolean' },
  unordered: { type: 'boolean' },
  signatures: { type: 'string' },
  header: { type: 'string', multiple: true },
  'remove-header': { type: 'string', multiple: true },
} as const;

export interface SettingsValues {
  /** The endpoint's new URL (--url is the service's, as for every command). */
  'endpoint-url'?: string;
  'event-filter'?: string;
  description?: string;
  'payload-filter'?: string;
  timeout?: string;
  'retry-schedule'?: string;
  'rate-limit'?: string;
  ordered?: boolean;
  unordered?: boolean;
  signatures?: string;
  header?: string[];
  'remove-header'?: string[];
}

/** What `update` sends: only the fields asked for; `default` and `none` return a setting to the service's default. */
function changesOf(values: SettingsValues): WebhookChanges {
  const changes: WebhookChanges = {};
  if (values['endpoint-url'] !== undefined) changes.url = values['endpoint-url'];
  if (values['event-filter'] !== undefined) changes.event_filter = listOf(values['event-filter']);
  if (values.description !== undefined) changes.description = values.description;
  if (values['payload-filter'] !== undefined) changes.payload_filter = payloadFilterOf(values['payload-filter']);
  if (values.timeout !== undefined) changes.timeout_s = orDefault(values.timeout, (text) => countFlag('--timeout', text)!);
  if (values['retry-schedule'] !== undefined) {
    changes.retry_schedule_s = orDefault(values['retry-schedule'], (text) =>
      listOf(text).map((delay) => countFlag('--retry-schedule', delay.replace(/s$/, ''))!),
    );
  }
  if (values['rate-limit'] !== undefined)
    changes.rate_limit_per_s = orDefault(values['rate-limit'], (text) => countFlag('--rate-limit', text)!);
  if (values.ordered && values.unordered) throw new UsageError('--ordered and --unordered cannot be combined');
  if (values.ordered || values.unordered) changes.ordered = values.ordered === true;
  if (values.signatures !== undefined) changes.signature_schemes = listOf(values.signatures) as SignatureScheme[];
  const headers = headerChanges(values.header ?? [], values['remove-header'] ?? []);
  if (headers) changes.headers = headers;
  if (Object.keys(changes).length === 0) throw new UsageError('webhooks update needs at least one setting to change');
  return changes;
}

function listOf(text: string): string[] {
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}

/** `default` (or `none`) is null: the setting goes back to the service's default. */
function orDefault<T>(text: string, parse: (text: string) => T): T | null {
  return text === 'default' || text === 'none' ? null : parse(text);
}

/** JSON, `@FILE` holding JSON, or `none` to remove the filter. The service checks the filter itself. */
function payloadFilterOf(text: string): WebhookChanges['payload_filter'] {
  if (text === 'none') return null;
  const json = text.startsWith('@') ? readFileSync(text.slice(1), 'utf8') : text;
  try {
    return JSON.parse(json) as WebhookChanges['payload_filter'];
  } catch {
    throw new UsageError('--payload-filter takes JSON, @FILE holding JSON, or none');
  }
}

/** `--header 'Name: value'` sets a header, `--remove-header Name` removes one; undefined when neither was given. */
function headerChanges(set: readonly string[], removed: readonly string[]): Record<string, string | null> | undefined {
  if (set.length === 0 && removed.length === 0) return undefined;
  const changes: Record<string, string | null> = {};
  for (const header of set) {
    const colon = header.indexOf(':');
    if (colon <= 0) throw new UsageError(`--header takes 'Name: value', not "${header}"`);
    changes[header.slice(0, colon).trim()] = header.slice(colon + 1).trim();
  }
  for (const name of removed) changes[name] = null;
  return changes;
}

export async function updateEndpoint(client: AuditTrailClient, id: string, values: SettingsValues, json: boolean): Promise<number> {
  const endpoint = await client.updateWebhook(id, changesOf(values));
  writeEndpoint(endpoint, 'updated', json);
  return 0;
}

export async function enableEndpoint(client: AuditTrailClient, id: string, json: boolean): Promise<number> {
  writeEndpoint(await client.enableWebhook(id), 'enabled', json);
  return 0;
}

export async function disableEndpoint(client: AuditTrailClient, id: string, json: boolean): Promise<number> {
  writeEndpoint(await client.disableWebhook(id), 'disabled', json);
  return 0;
}

/** The public keys, one per line (the current one first), for a receiver's configuration. */
export async function publicKeys(client: AuditTrailClient, id: string, json: boolean): Promise<number> {
  const keys = await client.getWebhookPublicKeys(id);
  if (json) process.stdout.write(`${JSON.stringify({ public_keys: keys })}\n`);
  else if (keys.length === 0) process.stdout.write('no Ed25519 key: the endpoint has never signed with ed25519\n');
  else {
    for (const key of keys) {
      process.stdout.write(`${printable(key.public_key)}${key.expires_at ? `  (signs until ${printable(key.expires_at)})` : ''}\n`);
    }
  }
  return 0;
}

function writeEndpoint(endpoint: WebhookEndpoint, what: string, json: boolean): void {
  if (json) process.stdout.write(`${JSON.stringify({ endpoint })}\n`);
  else process.stdout.write(`endpoint ${printable(endpoint.id)} ${what}: ${endpoint.active ? 'active' : 'disabled'}\n`);
}
