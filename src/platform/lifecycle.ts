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
