#!/usr/bin/env node
import './platform/nodeVersionCheck.ts';
import { constants } from 'node:os';
import { parseArgs } from 'node:util';
import { AppError } from './platform/errors.ts';
import { SERVICE_VERSION } from './platform/version.ts';
import { UsageError, asksForHelp, commandUsage, isArgumentError, usage } from './cli/usage.ts';
import type { Config } from './config/config.ts';
import type { Role } from './main.ts';
import type { Logger } from './platform/logger.ts';

/**
 * The commands, each loaded when it runs: `verify` is a customer's offline check and needs the verifier
 * alone, where loading the whole service (pg, koa, nats, the Kubernetes client) was most of its run
 * (BENCHMARKS.md, "Tamper evidence (issue 18)", the verifier's start). Commands of the service get the configuration and a logger; `verify` reads no configuration at all.
 */
type ServiceCommand = (args: string[], config: Config, log: Logger) => Promise<number>;
const SERVICE_COMMANDS: Record<string, () => Promise<ServiceCommand>> = {
  serve: async () => serve,
  migrate: async () => (await import('./cli/migrateCommand.ts')).runMigrate,
  keys: async () => (await import('./cli/keysCommand.ts')).runKeys,
  import: async () => (await import('./cli/importCommand.ts')).runImport,
  integrity: async () => (await import('./cli/integrityCommand.ts')).runIntegrity,
  streams: async () => (await import('./cli/streamsCommand.ts')).runStreams,
  redact: async () => (await import('./cli/redactCommand.ts')).runRedact,
  holds: async () => (await import('./cli/holdsCommand.ts')).runHolds,
  retention: async () => (await import('./cli/retentionCommand.ts')).runRetention,
  events: async () => (await import('./cli/eventsCommand.ts')).runEvents,
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === 'help' && rest[0] !== undefined) return main([rest[0], '--help']);
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(usage(SERVICE_VERSION));
    return command === undefined ? 2 : 0;
  }
  if (command === '--version') {
    process.stdout.write(`${SERVICE_VERSION}\n`);
    return 0;
  }
  if (asksForHelp(rest)) {
    const text = commandUsage(command);
    if (!text) throw new UsageError(`unknown command "${command}"; see audit-trail --help`);
    process.stdout.write(text);
    return 0;
  }
  if (command === 'verify')
    return (await import('./client/cli/verifyCommand.ts')).runVerify(rest, process.stdout, process.stderr, 'audit-trail');
  const load = Object.hasOwn(SERVICE_COMMANDS, command) ? SERVICE_COMMANDS[command] : undefined;
  if (!load) throw new UsageError(`unknown command "${command}"; see audit-trail --help`);
  const [{ loadConfig }, { createLogger }, run] = await Promise.all([import('./config/config.ts'), import('./platform/logger.ts'), load()]);
  const config = loadConfig();
  // Logs go to stderr for one-shot commands, so stdout carries only their result (the key, for mint).
  const log = createLogger(config.logLevel, command === 'serve' ? undefined : process.stderr);
  return run(rest, config, log);
}

/** `audit-trail serve`: the service's roles in this process, until SIGTERM or SIGINT. */
async function serve(args: string[], config: Config, log: Logger): Promise<number> {
  const [{ ROLES, defaultRoles, startService }, { stopRequested }] = await Promise.all([
    import('./main.ts'),
    import('./platform/shutdown.ts'),
  ]);
  const { values } = parseArgs({ args, options: { roles: { type: 'string', default: defaultRoles(process.env).join(',') } } });
  const roles = values.roles.split(',').map((role) => role.trim());
  const unknown = roles.filter((role) => !(ROLES as readonly string[]).includes(role));
  if (unknown.length > 0) throw new UsageError(`unknown role(s) ${unknown.join(', ')}; roles are ${ROLES.join(', ')}`);
  // Listening before start-up, so that a signal during it stops the service once started, gracefully.
  const stop = stopRequested(log, (signal) => process.exit(128 + constants.signals[signal]));
  // A stop asked for while a role still waits for Postgres at start ends the wait: nothing was started to drain.
  const abandon = new AbortController();
  void stop.then(() => abandon.abort());
  let service: Awaited<ReturnType<typeof startService>>;
  try {
    service = await startService({ config, roles: roles as Role[], log, startSignal: abandon.signal });
  } catch (error) {
    if (!abandon.signal.aborted) throw error;
    log.info('stopped during start-up');
    return 0;
  }
  await stop;
  await service.stop();
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    // ConfigError by name: config.ts (and zod) is not loaded for commands that read no configuration.
    if ((error as Error)?.name === 'ConfigError') process.stderr.write(`audit-trail: configuration error: ${(error as Error).message}\n`);
    else if (error instanceof UsageError || error instanceof AppError) process.stderr.write(`audit-trail: ${(error as Error).message}\n`);
    else if (isArgumentError(error)) {
      const command = process.argv[2] ?? '';
      process.stderr.write(`audit-trail: ${(error as Error).message}; see audit-trail ${command} --help\n`);
      process.exit(2);
    } else process.stderr.write(`audit-trail: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
