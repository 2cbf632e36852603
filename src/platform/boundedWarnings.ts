import type { Logger } from './logger.ts';

/**
 * A warning that recurs (every request refused while Postgres is full or away) logged at most once per
 * interval for each kind, the next line saying how many it left out: an outage under load wrote one line per
 * refused request (16,896 in one run), burying everything else and costing the disk and the log pipeline
 * most when they are needed. The first of each kind is logged at once.
 */
export class BoundedWarnings {
  private readonly intervalMs: number;
  private readonly now: () => number;
  private readonly kinds = new Map<string, { nextAt: number; suppressed: number }>();

  constructor(intervalMs = 10_000, now: () => number = () => performance.now()) {
    this.intervalMs = intervalMs;
    this.now = now;
  }

  warn(log: Logger, kind: string, fields: Record<string, unknown>, message: string): void {
    const now = this.now();
    const seen = this.kinds.get(kind);
    if (seen && now < seen.nextAt) {
      seen.suppressed += 1;
      return;
    }
    log.warn(seen && seen.suppressed > 0 ? { ...fields, suppressed: seen.suppressed } : fields, message);
    this.kinds.set(kind, { nextAt: now + this.intervalMs, suppressed: 0 });
  }
}
