/**
 * The CLI's usage text, apart from the commands: `--help` and a usage error print it without loading any
 * command's modules.
 */
export const INTEGRITY_USAGE = 'audit-trail integrity check [--tenant T] [--json]';

export const STREAMS_USAGE = 'audit-trail streams status [--tenant T] [--json]';

export const VERIFY_USAGE =
  'audit-trail verify --export FILE --public-key FILE... [--tree-head FILE...] [--consistency FILE...] [--complete]';

export function usage(version: string): string {
  return `audit-trail ${version}

Usage:
  audit-trail serve [--roles api,ingest,relay,worker,controller,sealer,streams]
  audit-trail migrate [--create-database]
  audit-trail keys mint --tenant T --scopes a,b [--cidr C]... [--description D] [--json]
  audit-trail keys revoke <lookup_id>
  audit-trail keys list [--tenant T] [--json]
  audit-trail import [--allow-old] FILE.ndjson
  ${INTEGRITY_USAGE}
  ${STREAMS_USAGE}
  ${VERIFY_USAGE}

Configuration comes from the environment (DATABASE_URL, REDIS_URL, NATS_URL, PORT, INTERNAL_PORT,
INGEST_TOKENS, KEY_PEPPER, SECRET_ENCRYPTION_KEY, KEY_ENVIRONMENT, LOG_LEVEL, ...); see README.md.
`;
}

/** Failure the operator must fix; printed as one line without a stack. */
export class UsageError extends Error {
  override name = 'UsageError';
}
