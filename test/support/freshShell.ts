import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { homedir } from 'node:os';

/**
 * The environment of a shell a newcomer opens: the machine's own PATH (whose node may be older than the
 * project's), none of the variables a test run or make adds. Commands the docs print must work here.
 */
function freshShellEnv(variables: Record<string, string> = {}): Record<string, string> {
  return { HOME: homedir(), PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...variables };
}

/**
 * Runs a command line, as printed, with bash in the repository directory and a fresh environment; `detached`
 * gives it a process group of its own, as a terminal does, so that a Ctrl-C can be sent to the whole group.
 */
export function spawnInFreshShell(
  commandLine: string,
  variables: Record<string, string> = {},
  options: { detached?: boolean } = {},
): ChildProcess {
  return spawn('bash', ['-c', commandLine], { cwd: process.cwd(), env: freshShellEnv(variables), detached: options.detached ?? false });
}

/** Runs a command line, as printed, in a fresh shell to its end: its exit code and output. */
export async function runInFreshShell(
  commandLine: string,
  variables: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawnInFreshShell(commandLine, variables);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stdout, stderr };
}
