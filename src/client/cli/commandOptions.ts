import type { EventFilters } from '../auditTrailClient.ts';
import { UsageError } from './usage.ts';

/**
 * The options several commands share, as node:util parseArgs takes them, and their conversion to what the
 * client takes. Values the API checks itself (times, ids) go through unchanged: its 422 names the field,
 * and one set of rules is better than two that drift apart.
 */

export const URL_OPTION = { url: { type: 'string' } } as const;

/** What selects events, for the list and the live endpoint alike. */
export const MATCH_OPTIONS = {
  action: { type: 'string' },
  'action-prefix': { type: 'string' },
  'user-id': { type: 'string' },
  'resource-type': { type: 'string' },
  'resource-id': { type: 'string' },
  phi: { type: 'string' },
} as const;

export const WINDOW_OPTIONS = { since: { type: 'string' }, until: { type: 'string' } } as const;

export const PAGING_OPTIONS = {
  limit: { type: 'string' },
  cursor: { type: 'string' },
  all: { type: 'boolean', default: false },
} as const;

export const OUTPUT_OPTION = { output: { type: 'string', short: 'o' } } as const;

interface MatchValues {
  action?: string;
  'action-prefix'?: string;
  'user-id'?: string;
  'resource-type'?: string;
  'resource-id'?: string;
  phi?: string;
  since?: string;
  until?: string;
}

/** The API's filters from the flags; absent flags stay absent (the API refuses a filter it was sent empty). */
export function eventFilters(values: MatchValues): EventFilters {
  const filters: EventFilters = {
    action: values.action,
    action_prefix: values['action-prefix'],
    user_id: values['user-id'],
    resource_type: values['resource-type'],
    resource_id: values['resource-id'],
    phi_involved: values.phi === undefined ? undefined : booleanFlag('--phi', values.phi),
    since: values.since,
    until: values.until,
  };
  return Object.fromEntries(Object.entries(filters).filter(([, value]) => value !== undefined));
}

function booleanFlag(flag: string, value: string): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new UsageError(`${flag} takes true or false`);
}

/** A positive integer flag, or undefined when absent. */
export function countFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new UsageError(`${flag} takes a positive whole number`);
  return Number(value);
}

/** A whole number of seconds, zero allowed. */
export function secondsFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`${flag} takes a whole number of seconds`);
  return Number(value);
}

/** `--cursor` resumes one walk, `--all` walks to the end: together they would say two things at once. */
export function pagingOf(values: { limit?: string; cursor?: string; all?: boolean }): { limit?: number; cursor?: string; all: boolean } {
  if (values.all && values.cursor !== undefined) throw new UsageError('--cursor and --all cannot be combined');
  return { limit: countFlag('--limit', values.limit), cursor: values.cursor, all: values.all === true };
}

export type OutputFormat = 'table' | 'json' | 'ndjson';

/** The output format among those a command offers; the first is its default. */
export function outputFormat<F extends OutputFormat>(value: string | undefined, offered: readonly F[]): F {
  if (value === undefined) return offered[0]!;
  if ((offered as readonly string[]).includes(value)) return value as F;
  throw new UsageError(`--output takes ${offered.join(', ')}`);
}

/** The operands a subcommand needs, by name, or a usage error naming the first missing one. */
export function operands(positionals: readonly string[], names: readonly string[]): string[] {
  if (positionals.length > names.length) throw new UsageError(`unexpected argument "${positionals[names.length]}"`);
  const missing = names.find((_, index) => positionals[index] === undefined);
  if (missing) throw new UsageError(`missing ${missing}`);
  return [...positionals];
}
