import { execFileSync } from 'node:child_process';
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
export function parseWithGo(values: ReadonlyArray<{ type: 'MicroTime' | 'Time'; value: string }>): GoParse[] {
  const output = execFileSync(kubeTimeChecker(), { input: JSON.stringify(values), encoding: 'utf8' });
  return JSON.parse(output) as GoParse[];
}
