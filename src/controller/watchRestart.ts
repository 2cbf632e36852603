import type { KubernetesObject, ListWatch } from '@kubernetes/client-node';
import { type Clock, systemClock } from '../platform/clock.ts';
import type { Logger } from '../platform/logger.ts';
import { Backoff, type BackoffPolicy } from './backoff.ts';

export interface RestartOptions {
  /** What is watched, for the log: a plural, `secrets`, a CRD name. */
  readonly what: string;
  readonly policy: BackoffPolicy;
  readonly log: Logger;
  /** False once the watch was stopped on purpose: it is then neither logged nor restarted. */
  readonly active: () => boolean;
  /** Every failure, before the restart is scheduled. */
  readonly onError?: (error: unknown) => void;
  readonly clock?: Clock;
}

/**
 * ListWatch resumes by itself after a 410 or a client-side timeout, but stops on any other error (a cut
 * connection, an API server restart or overload, a refused list): restart it, after a delay that doubles
 * with each failure in a row up to a cap, so a struggling API server is not hammered. Stopping a ListWatch
 * aborts its request, which it reports as an error too (an AbortError): that one is the stop itself, so
 * nothing is logged once the watch is no longer active.
 */
export function restartOnError(informer: ListWatch<KubernetesObject>, options: RestartOptions): void {
  const backoff = new Backoff(options.policy);
  const clock = options.clock ?? systemClock;
  informer.on('error', (error: unknown) => {
    if (!options.active()) return;
    options.onError?.(error);
    const delay = backoff.next(clock.now());
    options.log.warn({ err: error, watch: options.what, retry_in_ms: delay }, 'watch failed; restarting it');
    clock.setTimer(() => {
      if (options.active()) informer.start().catch(() => undefined);
    }, delay);
  });
}
