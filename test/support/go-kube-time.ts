import { execFile } from 'node:child_process';
import { goProgram } from './goPrograms.ts';

/**
 * Go's own reading of Kubernetes timestamps: test/support/go/kubetime.go, built with the Go toolchain of
 * Debian's golang-go (make test-tools installs it, as it installs promtool), parses each value with the layout
 * the API server decodes it with (metav1.MicroTime: RFC3339Micro; metav1.Time: time.RFC3339).
 */
export interface GoParse {
  readonly value: string;
  /** What time.Parse answered; empty when it parsed. */
  readonly error: string;
  /** The value as metav1 writes it back (UTC; whole seconds for a Time). */
  readonly canonical: string;
}

const SOURCE = 'test/support/go/kubetime.go';

/** The standard library only: nothing to fetch. */
const kubeTimeChecker = () => goProgram(SOURCE);

/** Each value parsed by Go as the API server parses a field of that type. */
export async function parseWithGo(values: ReadonlyArray<{ type: 'MicroTime' | 'Time'; value: string }>): Promise<GoParse[]> {
  const checker = execFile(await kubeTimeChecker(), { encoding: 'utf8' });
  const output = new Promise<string>((resolve, reject) => {
    let text = '';
    checker.stdout!.on('data', (chunk: string) => (text += chunk));
    checker.once('error', reject);
    checker.once('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`kubetime exited with ${code}`))));
  });
  checker.stdin!.end(JSON.stringify(values));
  return JSON.parse(await output) as GoParse[];
}
