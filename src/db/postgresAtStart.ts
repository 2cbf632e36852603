import { sleep } from '../platform/sleep.ts';
import { ServiceUnavailableError } from '../platform/errors.ts';
import { backoffDelay, type BackoffPolicy } from '../platform/backoff.ts';
import type { Logger } from '../platform/logger.ts';
import { isDatabaseUnavailable } from './sqlstate.ts';

/**
 * Between attempts: the cap keeps a long outage's retries a few seconds apart, and the spread keeps the pods
 * of a deployment restarted together from knocking in step.
 */
const START_BACKOFF: BackoffPolicy = { initialMs: 250, maxMs: 5_000, spread: [0.8, 1.2] };

export interface PostgresAtStartOptions {
  readonly log: Logger;
  readonly backoff?: BackoffPolicy;
  /** Aborted when the process is asked to stop while it still waits: the wait ends with the signal's reason. */
  readonly signal?: AbortSignal;
}

/**
 * Runs a start-up step that needs Postgres, again and again while Postgres is away (down, restarting,
 * refusing connections), with a log line per failed attempt. A role that died of a database that is not
 * there yet would be restarted by Kubernetes with a backoff of up to five minutes (CrashLoopBackOff) after
 * a failover that took seconds; waiting here, not ready, it starts the moment Postgres answers. Anything
 * else the step throws (an unmigrated database, a retired signing key) is not a passing condition and ends
 * the start at once.
 */
export async function untilPostgresAnswers<T>(step: string, run: () => Promise<T>, options: PostgresAtStartOptions): Promise<T> {
  const backoff = options.backoff ?? START_BACKOFF;
  for (let attempt = 1; ; attempt += 1) {
    options.signal?.throwIfAborted();
    try {
      const result = await run();
      if (attempt > 1) options.log.info({ step, attempts: attempt }, 'Postgres answers; start-up continues');
      return result;
    } catch (error) {
      if (!postgresAway(error)) throw error;
      const retryInMs = backoffDelay(backoff, attempt);
      options.log.warn(
        { step, attempt, retry_in_ms: retryInMs, err: (error as Error).cause ?? error },
        'Postgres unavailable at start; not ready, retrying',
      );
      await sleep(retryInMs, { signal: options.signal });
    }
  }
}

function postgresAway(error: unknown): boolean {
  return error instanceof ServiceUnavailableError || isDatabaseUnavailable(error);
}
