import { TooManyLongReadsError, type LongReadRefusal } from './errors.ts';

/**
 * Admission for long reads: requests that hold a database connection for as long as a client takes to read
 * their answer (exports, exports with proofs, and the log streams to come). Short reads (lists, lookups)
 * must never wait behind them, so long reads run on a pool of their own (LongReads in db/longReads.ts), and
 * this counter keeps them within it: at most `perInstance` at a time in this process, and at most
 * `perTenant` of one tenant, so one tenant running exports flat out leaves slots for the others. A request
 * past either cap is refused at once (429 `concurrent_exports` with Retry-After) instead of queueing for a
 * connection until the pool's connect timeout turns it into a 503.
 *
 * Pure bookkeeping, no I/O: the caller releases what it took, exactly once (release() is idempotent).
 */

export interface LongReadLimits {
  /** Long reads of one tenant at a time in this process. */
  readonly perTenant: number;
  /** Long reads of all tenants at a time in this process. */
  readonly perInstance: number;
}

export interface LongReadObserver {
  /** A long read was admitted (+1) or ended (-1); the gauge of long reads in progress. */
  active(delta: 1 | -1): void;
  /** A long read was refused, at the tenant's cap or the instance's. */
  refused(limit: 'tenant' | 'instance'): void;
}

export interface LongReadSlot {
  /** Returns the slot; later calls do nothing. */
  release(): void;
}

/** Seconds a refused client is told to wait: a typical export of 10,000 events takes about this long. */
const LONG_READ_RETRY_AFTER_SECONDS = 2;

export class LongReadSlots {
  private readonly limits: LongReadLimits;
  private readonly observer: LongReadObserver | undefined;
  private readonly byTenant = new Map<string, number>();
  private total = 0;

  private readonly refusal: LongReadRefusal;

  /** `refusal`: the code of the 429 past a cap (live streams count apart from exports, with a code of their own). */
  constructor(limits: LongReadLimits, observer?: LongReadObserver, refusal: LongReadRefusal = 'concurrent_exports') {
    if (!(limits.perTenant >= 1 && limits.perInstance >= limits.perTenant)) {
      throw new RangeError('long-read limits need 1 <= perTenant <= perInstance');
    }
    this.limits = limits;
    this.observer = observer;
    this.refusal = refusal;
  }

  /**
   * Takes a slot for the tenant, or throws TooManyLongReadsError naming the cap that was reached; `what` is
   * what the caller runs, in the plural, for the message ("exports").
   */
  take(tenantId: string, what: string): LongReadSlot {
    const ofTenant = this.byTenant.get(tenantId) ?? 0;
    if (ofTenant >= this.limits.perTenant) {
      this.observer?.refused('tenant');
      throw new TooManyLongReadsError(
        `This tenant already has ${ofTenant} ${what} running on this instance, the most it may run at once; retry after Retry-After seconds.`,
        this.limits.perTenant,
        LONG_READ_RETRY_AFTER_SECONDS,
        this.refusal,
      );
    }
    if (this.total >= this.limits.perInstance) {
      this.observer?.refused('instance');
      throw new TooManyLongReadsError(
        `This instance is running as many ${what} as it may at once (${this.limits.perInstance}); retry after Retry-After seconds.`,
        this.limits.perTenant,
        LONG_READ_RETRY_AFTER_SECONDS,
        this.refusal,
      );
    }
    this.byTenant.set(tenantId, ofTenant + 1);
    this.total += 1;
    this.observer?.active(1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        const left = (this.byTenant.get(tenantId) ?? 1) - 1;
        if (left === 0) this.byTenant.delete(tenantId);
        else this.byTenant.set(tenantId, left);
        this.total -= 1;
        this.observer?.active(-1);
      },
    };
  }

  /** Long reads in progress: in all, and of one tenant. */
  inProgress(tenantId?: string): number {
    return tenantId === undefined ? this.total : (this.byTenant.get(tenantId) ?? 0);
  }
}
