import { spread } from '../platform/backoff.ts';
import { systemClock, type Clock } from '../platform/clock.ts';

/**
 * Leader election on a coordination.k8s.io Lease, with client-go's semantics: candidates try to acquire
 * every retryPeriod; the leader renews every retryPeriod and steps down when it has not renewed for
 * renewDeadline; a lease is taken over only when its holder has not renewed for leaseDuration, measured on
 * the candidate's own clock from when it last saw the record change (so clock skew between nodes does not
 * matter). leaseDuration > renewDeadline > retryPeriod guarantees the old leader stops acting before anyone
 * else may start.
 */

export interface LeaseRecord {
  readonly holderIdentity: string | null;
  readonly leaseDurationSeconds: number;
  readonly acquireTime: string | null;
  readonly renewTime: string | null;
  readonly leaseTransitions: number;
  /** Optimistic concurrency token of the stored object. */
  readonly resourceVersion?: string;
}

/** Where the Lease lives: the Kubernetes API in production. Writes fail when resourceVersion is stale. */
export interface LeaseStore {
  get(): Promise<LeaseRecord | undefined>;
  create(record: LeaseRecord): Promise<LeaseRecord>;
  update(record: LeaseRecord): Promise<LeaseRecord>;
}

export interface LeaderElectionOptions {
  readonly identity: string;
  readonly store: LeaseStore;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly onStartedLeading: () => void;
  readonly onStoppedLeading: () => void;
  /** A try to read, take or renew the Lease failed; `inARow` counts the failures since it last reached it. */
  readonly onError?: (error: Error, inARow: number) => void;
  /** The Lease was reached again after `failures` failed tries. */
  readonly onReached?: (failures: number) => void;
  readonly clock?: Clock;
}

/** Whether a candidate can reach its Lease: what its readiness and its logs say. */
export interface LeaseContact {
  /** How long ago a try last completed (the Lease read, and taken, renewed or found held by another); undefined: never. */
  readonly reachedAgoMs: number | undefined;
  /** The error of the last try, while tries fail. */
  readonly lastError: Error | undefined;
}

export const DEFAULT_LEASE_TIMING = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

const JITTER = 1.2;

export class LeaderElector {
  private readonly options: LeaderElectionOptions;
  private readonly clock: Clock;
  private observed: { record: LeaseRecord; at: number } | undefined;
  private leading = false;
  private lastRenewAt = 0;
  private cancelTimer: (() => void) | undefined;
  /** The try in progress, if any: stop() waits for it, so that the release writes over the latest renewal. */
  private inFlight: Promise<void> = Promise.resolve();
  private stopped = false;
  private reachedAt: number | undefined;
  private failures = 0;
  private lastError: Error | undefined;

  constructor(options: LeaderElectionOptions) {
    const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = options;
    if (!(leaseDurationMs > renewDeadlineMs)) throw new Error('leaseDuration must be greater than renewDeadline');
    if (!(renewDeadlineMs > JITTER * retryPeriodMs)) throw new Error(`renewDeadline must be greater than ${JITTER} × retryPeriod`);
    if (retryPeriodMs <= 0) throw new Error('retryPeriod must be positive');
    this.options = options;
    this.clock = options.clock ?? systemClock;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  get contact(): LeaseContact {
    const reachedAgoMs = this.reachedAt === undefined ? undefined : this.clock.now() - this.reachedAt;
    return { reachedAgoMs, lastError: this.failures > 0 ? this.lastError : undefined };
  }

  start(): void {
    this.schedule(0);
  }

  /** Stops competing; a leader releases the lease so that another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    await this.inFlight;
    if (!this.leading) return;
    this.stepDown();
    const current = this.observed?.record;
    if (current?.holderIdentity !== this.options.identity) return;
    await this.options.store
      .update({ ...current, holderIdentity: null, leaseDurationSeconds: 1, renewTime: new Date(this.clock.now()).toISOString() })
      // A conflict: another replica took the Lease meanwhile, so there is nothing left to release.
      .catch((error: Error) => {
        if (!isConflict(error)) this.options.onError?.(error, this.failures + 1);
      });
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.cancelTimer = this.clock.setTimer(() => {
      this.inFlight = this.cycle();
    }, delayMs);
  }

  private async cycle(): Promise<void> {
    const succeeded = await this.tryAcquireOrRenew().then(
      (taken) => {
        this.reached();
        return taken;
      },
      (error: Error) => {
        // A conflict is another candidate's write that came first: the Lease was reached all the same.
        if (isConflict(error)) this.reached();
        else {
          this.failures += 1;
          this.lastError = error;
          this.options.onError?.(error, this.failures);
        }
        return false;
      },
    );
    if (this.stopped) return;
    const now = this.clock.now();
    if (succeeded) {
      this.lastRenewAt = now;
      if (!this.leading) {
        this.leading = true;
        this.options.onStartedLeading();
      }
    } else if (this.leading && now - this.lastRenewAt >= this.options.renewDeadlineMs) {
      // Not renewed in time: another replica may take over after leaseDuration, so stop acting now.
      this.stepDown();
    }
    const period = this.options.retryPeriodMs;
    this.schedule(this.leading ? period : spread(period, [1, JITTER]));
  }

  private reached(): void {
    this.reachedAt = this.clock.now();
    if (this.failures > 0) this.options.onReached?.(this.failures);
    this.failures = 0;
  }

  private stepDown(): void {
    if (!this.leading) return;
    this.leading = false;
    this.options.onStoppedLeading();
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = new Date(this.clock.now());
    const { identity, store, leaseDurationMs } = this.options;
    const desired = (current: LeaseRecord | undefined): LeaseRecord => ({
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      acquireTime: current?.holderIdentity === identity ? current.acquireTime : now.toISOString(),
      renewTime: now.toISOString(),
      leaseTransitions:
        current === undefined ? 0 : current.holderIdentity === identity ? current.leaseTransitions : current.leaseTransitions + 1,
      ...(current?.resourceVersion === undefined ? {} : { resourceVersion: current.resourceVersion }),
    });
    const current = await store.get();
    if (!current) {
      this.remember(await store.create(desired(undefined)));
      return true;
    }
    if (
      !this.observed ||
      this.observed.record.resourceVersion !== current.resourceVersion ||
      this.observed.record.renewTime !== current.renewTime
    ) {
      this.observed = { record: current, at: this.clock.now() };
    }
    const heldByOther = current.holderIdentity !== null && current.holderIdentity !== '' && current.holderIdentity !== identity;
    const expired = this.observed.at + current.leaseDurationSeconds * 1000 <= this.clock.now();
    if (heldByOther && !expired) return false;
    this.remember(await store.update(desired(current)));
    return true;
  }

  private remember(record: LeaseRecord): void {
    this.observed = { record, at: this.clock.now() };
  }
}

function isConflict(error: unknown): boolean {
  const { code, statusCode } = error as { code?: unknown; statusCode?: unknown };
  return code === 409 || statusCode === 409;
}
