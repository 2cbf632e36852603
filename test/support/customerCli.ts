import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** The CLI as the package ships it (make build compiles src/client into packages/client/dist). */
const CLI = resolve('packages/client/dist/cli/main.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI in a child process with only PATH and the given variables in its environment. */
export async function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}
