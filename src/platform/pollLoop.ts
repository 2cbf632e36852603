import { coerceError } from './errors.ts';
import { systemClock, type Clock } from './clock.ts';

/**
 * What a pass (or a failed one) asks for next: a pause in milliseconds (0: at once), a backoff (a pause that
 * a wake during the pass does not skip: the pass failed in part), or the end of the loop.
 */
export type NextPass = number | { readonly backoffMs: number } | 'stop';

export interface PollLoopOptions {
  /** One pass over the work; resolves with what comes next. */
  readonly pass: () => Promise<NextPass>;
  /** A pass threw: log it, and say what comes next (a backoff, usually). */
  readonly onError: (error: Error) => NextPass;
  readonly clock?: Clock;
}

/**
 * One background loop that polls: it runs a pass, pauses for as long as the pass asked, and runs the next,
 * until stopped. The pause ends early on wake() (a notification that there is work) and on stop(); a wake
 * that comes during a pass cuts the pause after it to nothing, so a notification is never lost to the
 * window between a pass and its pause (the pause after a failed pass, a backoff, is kept). stop() resolves once the pass in progress has finished.
 *
 * Used by the sealer, the delivery relay, the replay runner and the log-stream runner and workers.
 */
export class PollLoop {
  private readonly options: PollLoopOptions;
  private readonly clock: Clock;
  private running: Promise<void> | undefined;
  private isStopped = false;
  private wokenDuringPass = false;
  private endPause: (() => void) | undefined;
  private readonly sleepers = new Set<() => void>();

  constructor(options: PollLoopOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
  }

  start(): void {
    this.running ??= this.loop();
  }

  get stopped(): boolean {
    return this.isStopped;
  }

  /** A wake() came since the current pass started: the pass may skip work it would only do before a pause. */
  get woken(): boolean {
    return this.wokenDuringPass;
  }

  /** There is work: the pause in progress ends now, or the next one is skipped. */
  wake(): void {
    this.wokenDuringPass = true;
    this.endPause?.();
  }

  /** Ends the loop after the pass in progress (and any sleep() under way ends at once). */
  async stop(): Promise<void> {
    this.isStopped = true;
    this.endPause?.();
    for (const wake of this.sleepers) wake();
    await this.running;
  }

  /** Waits `ms`, or less if the loop stops meanwhile: for waits inside a pass (a backoff, a throttle). */
  sleep(ms: number): Promise<void> {
    if (this.isStopped || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        cancel();
        this.sleepers.delete(done);
        resolve();
      };
      const cancel = this.clock.setTimer(done, ms);
      this.sleepers.add(done);
    });
  }

  private async loop(): Promise<void> {
    while (!this.isStopped) {
      this.wokenDuringPass = false;
      let next: NextPass;
      let failed = false;
      try {
        next = await this.options.pass();
      } catch (thrown) {
        next = this.options.onError(coerceError(thrown));
        failed = true;
      }
      if (next === 'stop') {
        this.isStopped = true;
        break;
      }
      // A backoff is kept even if a wake came during the failed pass (a wake during the backoff ends it).
      if (typeof next === 'object') await this.pause(next.backoffMs);
      else if (failed || !this.wokenDuringPass) await this.pause(next);
    }
  }

  private pause(ms: number): Promise<void> {
    if (this.isStopped || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        cancel();
        this.endPause = undefined;
        resolve();
      };
      const cancel = this.clock.setTimer(done, ms);
      this.endPause = done;
    });
  }
}
