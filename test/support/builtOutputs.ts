import { execFileSync } from 'node:child_process';

/**
 * Fails unless the clone's build outputs are as new as their sources (make's own test, `make --question`). The
 * files that use them run beside others (scripts/run-suite.ts): they must find the build that `make test` made
 * and never make one themselves, since a rebuild rewrites dist/ and packages/client/dist under the CLI tests
 * running at the same moment.
 */
export function expectBuilt(): void {
  try {
    execFileSync('make', ['--question', 'dist/.built', 'packages/client/dist/.built'], { stdio: 'ignore' });
  } catch {
    throw new Error('dist/ or packages/client/dist is missing or older than its sources: run make build first (make test does)');
  }
}
