import { spawn, type ChildProcess } from 'node:child_process';
import { homedir } from 'node:os';

/**
 * The environment of a shell a newcomer opens: the machine's own PATH (whose node may be older than the
 * project's), none of the variables a test run or make adds. Commands the docs print must work here.
 */
export function freshShellEnv(variables: Record<string, string> = {}): Record<string, string> {
  return { HOME: homedir(), PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...variables };
}

/** Runs a command line, as printed, with bash in the repository directory and a fresh environment. */
export function spawnInFreshShell(commandLine: string, variables: Record<string, string> = {}): ChildProcess {
  return spawn('bash', ['-c', commandLine], { cwd: process.cwd(), env: freshShellEnv(variables) });
}
