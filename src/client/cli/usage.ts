/**
 * The customer CLI's usage text. `--help` prints it without loading any command or reading any
 * configuration, so help works where nothing is set up yet.
 */

export const PROGRAM = 'audit-trail-client';

/** The package's version (packages/client/package.json; test/client/cli.test.ts keeps them equal). */
export const CLIENT_VERSION = '0.1.0';

/** verify's arguments, shared with the operator CLI's `audit-trail verify`, which runs the same command. */
export const VERIFY_ARGUMENTS =
  '(--export FILE [--consistency FILE...] [--complete] | --stream-copy FILE...) --public-key FILE... [--tree-head FILE...]';

const MATCH = '[--action A | --action-prefix P] [--user-id U] [--resource-type T] [--resource-id R] [--phi true|false]';
const WINDOW = '[--since TIME] [--until TIME]';
const PAGING = '[--limit N] [--cursor C | --all]';

/** Each command's usage lines, as `audit-trail-client COMMAND --help` prints them. */
export const COMMAND_USAGE: Readonly<Record<string, readonly string[]>> = {
  events: [`${PROGRAM} events list ${MATCH} [--search TEXT] ${WINDOW} ${PAGING} [--output table|json|ndjson]`],
  webhooks: [
    `${PROGRAM} webhooks list [--output table|json]`,
    `${PROGRAM} webhooks deliveries WEBHOOK_ID [--status pending|succeeded|failed] ${WINDOW} ${PAGING} [--output table|json|ndjson]`,
    `${PROGRAM} webhooks retry WEBHOOK_ID DELIVERY_ID [--output table|json]`,
    `${PROGRAM} webhooks replay WEBHOOK_ID --since TIME --until TIME [--include-delivered] [--wait] [--output table|json]`,
    `${PROGRAM} webhooks test WEBHOOK_ID [--output table|json]`,
    `${PROGRAM} webhooks rotate WEBHOOK_ID [--overlap SECONDS] [--force] [--output table|json]`,
    `${PROGRAM} webhooks update WEBHOOK_ID [--endpoint-url URL] [--event-filter A,B] [--description D] [--payload-filter JSON|@FILE|none] [--timeout SECONDS|default] [--retry-schedule S,S,…|default] [--rate-limit N|none] [--ordered|--unordered] [--signatures hmac,ed25519] [--header 'Name: value']... [--remove-header NAME]... [--output table|json]`,
    `${PROGRAM} webhooks enable|disable|public-keys WEBHOOK_ID [--output table|json]`,
  ],
  listen: [`${PROGRAM} listen --forward-to URL ${MATCH} [--secret HEX]`],
  verify: [`${PROGRAM} verify ${VERIFY_ARGUMENTS}`],
  witness: [
    `${PROGRAM} witness keygen --name NAME --key FILE`,
    `${PROGRAM} witness --log-key VKEY|@FILE --name NAME --key FILE --state DIR`,
  ],
};

/** What every command that calls the API reads; verify reads nothing and calls nothing. */
const CONFIGURATION = `Configuration:
  AUDIT_TRAIL_URL      the service's address, e.g. https://audit.example.com (or --url URL on any command)
  AUDIT_TRAIL_API_KEY  your API key (atr_live_...); read from the environment only, never printed
Exit status: 0 done, 1 the API refused or a check failed, 2 a usage mistake or a value the API found invalid (422).
Times are RFC 3339.
`;

export function usage(): string {
  const lines = Object.values(COMMAND_USAGE).flat();
  return `${PROGRAM} ${CLIENT_VERSION}: the audit trail from a terminal

Usage:
${lines.map((line) => `  ${line}`).join('\n')}

${CONFIGURATION}`;
}

/** One command's usage; undefined for a command that does not exist. */
export function commandUsage(command: string): string | undefined {
  const lines = Object.hasOwn(COMMAND_USAGE, command) ? COMMAND_USAGE[command] : undefined;
  if (!lines) return undefined;
  return `Usage:\n${lines.map((line) => `  ${line}`).join('\n')}\n${command === 'verify' ? '' : `\n${CONFIGURATION}`}`;
}

/** True when the arguments ask for help (before any `--`, after which everything is an operand). */
export function asksForHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}

/** A mistake in the command line or the configuration: one line, exit status 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/**
 * node:util parseArgs' own refusals (an unknown option, a missing value, an unexpected operand) are
 * TypeErrors with an ERR_PARSE_ARGS_ code: the user's mistake, not the program's.
 */
export function isArgumentError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}
