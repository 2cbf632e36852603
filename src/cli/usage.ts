/**
 * The CLI's usage text, apart from the commands: `--help` and a usage error print it without loading any
 * command's modules, and without reading the configuration (so `--help` works where nothing is set up).
 */
export const INTEGRITY_USAGE = 'audit-trail integrity check [--tenant T] [--json]';

export const STREAMS_USAGE = 'audit-trail streams status [--tenant T] [--json]';

export const VERIFY_USAGE =
  'audit-trail verify --export FILE --public-key FILE... [--tree-head FILE...] [--consistency FILE...] [--complete]';

/** Each command's usage lines, as `audit-trail COMMAND --help` prints them. */
export const COMMAND_USAGE: Readonly<Record<string, readonly string[]>> = {
  serve: ['audit-trail serve [--roles api,ingest,relay,worker,controller,sealer,streams]'],
  migrate: ['audit-trail migrate [--create-database]'],
  keys: [
    'audit-trail keys mint --tenant T --scopes a,b [--cidr C]... [--description D] [--json]',
    'audit-trail keys revoke <lookup_id>',
    'audit-trail keys list [--tenant T] [--json]',
  ],
  import: ['audit-trail import [--allow-old] FILE.ndjson'],
  integrity: [INTEGRITY_USAGE],
  streams: [STREAMS_USAGE],
  verify: [VERIFY_USAGE],
};

const CONFIGURATION = `Configuration comes from the environment (DATABASE_URL, REDIS_URL, NATS_URL, PORT, INTERNAL_PORT,
INGEST_TOKENS, KEY_PEPPER, SECRET_ENCRYPTION_KEY, KEY_ENVIRONMENT, LOG_LEVEL, ...); see README.md.
`;

export function usage(version: string): string {
  const lines = Object.values(COMMAND_USAGE).flat();
  return `audit-trail ${version}

Usage:
${lines.map((line) => `  ${line}`).join('\n')}

${CONFIGURATION}`;
}

/** One command's usage, for `audit-trail COMMAND --help`; undefined for a command that does not exist. */
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

/** Failure the operator must fix; printed as one line without a stack. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/**
 * node:util parseArgs' own refusals (an unknown option, a missing value, an unexpected operand) are
 * TypeErrors with an ERR_PARSE_ARGS_ code: the operator's mistake, not the program's.
 */
export function isArgumentError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}
