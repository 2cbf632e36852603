import { VERIFY_ARGUMENTS } from '../client/cli/usage.ts';

export { UsageError, asksForHelp, isArgumentError } from '../client/cli/usage.ts';

/**
 * The CLI's usage text, apart from the commands: `--help` and a usage error print it without loading any
 * command's modules, and without reading the configuration (so `--help` works where nothing is set up).
 */
export const INTEGRITY_USAGE = 'audit-trail integrity check [--tenant T] [--json]';

export const PUBLISH_USAGE = 'audit-trail integrity publish --tenant T (--directory DIR | --bucket B [--prefix P]) [--all]';

export const STREAMS_USAGE = 'audit-trail streams status [--tenant T] [--json]';

/** The customer CLI's verify (audit-trail-client verify, src/client/cli), run under this CLI's name. */
const VERIFY_USAGE = `audit-trail verify ${VERIFY_ARGUMENTS}`;

/** Each command's usage lines, as `audit-trail COMMAND --help` prints them. */
export const COMMAND_USAGE: Readonly<Record<string, readonly string[]>> = {
  serve: ['audit-trail serve [--roles api,ingest,relay,worker,controller,sealer,streams,retention]'],
  migrate: ['audit-trail migrate [--create-database]'],
  keys: [
    'audit-trail keys mint --tenant T --scopes a,b [--cidr C]... [--description D] [--json]',
    'audit-trail keys revoke <lookup_id>',
    'audit-trail keys list [--tenant T] [--json]',
  ],
  import: ['audit-trail import [--allow-old] FILE.ndjson'],
  integrity: [INTEGRITY_USAGE, PUBLISH_USAGE],
  streams: [STREAMS_USAGE],
  redact: ['audit-trail redact --tenant T --event ID --fields details.patient_name,justification --reference R [--json]'],
  holds: ['audit-trail holds list [--tenant T] [--all] [--json]'],
  retention: ['audit-trail retention plan [--tenant T] [--json]', 'audit-trail retention run [--tenant T] [--json]'],
  events: ['audit-trail events compact [--batch-size N] [--json]'],
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
