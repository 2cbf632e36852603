import type { Logger } from './logger.ts';
import { coerceError } from './errors.ts';

type Release = () => Promise<void> | void;

/**
 * Resources are opened by the composition root and released in reverse order of opening, so that what
 * depends on a pool or connection stops before it.
 */
export class Releasers {
  private readonly releasers: Array<{ name: string; release: Release }> = [];
  private released = false;

  add(name: string, release: Release): void {
    this.releasers.push({ name, release });
  }

  async releaseAll(log?: Logger): Promise<void> {
    if (this.released) return;
    this.released = true;
    for (const { name, release } of this.releasers.reverse()) {
      try {
        await release();
        log?.debug({ resource: name }, 'released');
      } catch (thrown) {
        log?.error({ resource: name, err: coerceError(thrown) }, 'release failed');
      }
    }
  }
}

/**
 * Resolves on the first SIGTERM or SIGINT, which starts the graceful stop. Draining in-flight requests,
 * messages and outcome writes takes a moment, and second signals are common meanwhile (a wrapper script
 * that forwards what the whole process group already got, a supervisor that repeats itself, an impatient
 * Ctrl-C): a second one is logged and changes nothing; a third calls `force`, for an operator who
 * really wants the process gone.
 */
export function stopRequested(log: Logger, force: (signal: NodeJS.Signals) => void): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      received += 1;
      if (received === 1) {
        log.info({ signal }, 'shutting down: draining in-flight work (a third signal forces exit)');
        resolve(signal);
      } else if (received === 2) {
        log.warn({ signal }, 'already shutting down; one more signal forces exit');
      } else {
        log.error({ signal }, 'forced exit before the drain finished');
        force(signal);
      }
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
