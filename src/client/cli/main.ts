#!/usr/bin/env node
import { AuditTrailApiError } from '../apiTransport.ts';
import { CLIENT_VERSION, PROGRAM, UsageError, asksForHelp, commandUsage, isArgumentError, usage } from './usage.ts';

/**
 * `audit-trail-client`, the customer CLI shipped in @audit-trail/client (its `bin`): the trail, webhook
 * operations, live forwarding to a local server and offline verification, on Node 20 or later with
 * nothing but the package. Each command is loaded when it runs, so `--help` and `verify` load no more than
 * they need.
 */
type Command = (args: string[]) => Promise<number>;
const COMMANDS: Record<string, () => Promise<Command>> = {
  events: async () => (await import('./eventsCommand.ts')).runEvents,
  webhooks: async () => (await import('./webhooksCommand.ts')).runWebhooks,
  listen: async () => (await import('./listenCommand.ts')).runListen,
  verify: async () => (await import('./verifyCommand.ts')).runVerify,
  witness: async () => (await import('./witnessCommand.ts')).runWitness,
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === 'help' && rest[0] !== undefined) return main([rest[0], '--help']);
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(usage());
    return command === undefined ? 2 : 0;
  }
  if (command === '--version') {
    process.stdout.write(`${CLIENT_VERSION}\n`);
    return 0;
  }
  const load = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!load) throw new UsageError(`unknown command "${command}"`);
  if (asksForHelp(rest)) {
    process.stdout.write(commandUsage(command)!);
    return 0;
  }
  return (await load())(rest);
}

/** One line for any failure: what went wrong in the user's words, never a stack or the key. */
function failureLine(error: unknown): string {
  if (error instanceof AuditTrailApiError) {
    const details = (error.body as { details?: Array<{ field?: unknown; message?: unknown }> } | undefined)?.details;
    const fields = Array.isArray(details) ? details.map((detail) => `${String(detail.field)}: ${String(detail.message)}`).join('; ') : '';
    // A 422's message usually is its details already ("since: must be ..."): said once.
    const said = fields && !error.message.endsWith(fields) ? ` (${fields})` : '';
    const hint = error.status === 401 ? ' (check AUDIT_TRAIL_API_KEY and the address)' : '';
    return `${error.message}${said}${hint}${error.requestId ? ` [request ${error.requestId}]` : ''}`;
  }
  return (error as Error)?.message ?? String(error);
}

/**
 * 2 for a mistake in what the user typed: the command line, or a value the API found invalid (a 422 names
 * the flag's field: `--since yesterday`); 1 for everything else that failed.
 */
function exitStatusOf(error: unknown): number {
  if (error instanceof UsageError || isArgumentError(error)) return 2;
  return error instanceof AuditTrailApiError && error.status === 422 ? 2 : 1;
}

// A reader that stops early (`| head`) closes the pipe: that is the end of the output, not a failure.
process.stdout.on('error', (error: NodeJS.ErrnoException) => process.exit(error.code === 'EPIPE' ? 0 : 1));

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const command = process.argv[2];
    if (error instanceof UsageError || isArgumentError(error)) {
      const help = command && Object.hasOwn(COMMANDS, command) ? `${PROGRAM} ${command} --help` : `${PROGRAM} --help`;
      process.stderr.write(`${PROGRAM}: ${(error as Error).message}; see ${help}\n`);
    } else {
      process.stderr.write(`${PROGRAM}: ${failureLine(error)}\n`);
    }
    process.exit(exitStatusOf(error));
  },
);
