import type { ConnectionBudget } from './connectionBudget.ts';
import { type Clock, systemClock } from '../platform/clock.ts';
import type { Logger } from '../platform/logger.ts';
import { LongReadDutyCycle, type LongReadDutyCycleLimits, type LongReadPace } from '../platform/longReadDutyCycle.ts';
import { LongReadSlots, type LongReadLimits, type LongReadObserver, type LongReadSlot } from '../platform/longReadSlots.ts';
import { LongReadYield, type LongReadTurns, type LongReadYieldLimits } from '../platform/longReadYield.ts';
import { Database } from './database.ts';
import type { DatabasePooler } from './postgresClient.ts';

export interface LongReadsOptions {
  readonly url: string;
  readonly limits: LongReadLimits;
  readonly applicationName: string;
  readonly log: Logger;
  readonly observer?: LongReadObserver;
  /** How long reads yield to short requests (platform/longReadYield.ts); they do not without it. */
  readonly yieldLimits?: LongReadYieldLimits;
  /** The duty cycle of long reads while short requests are about (platform/longReadDutyCycle.ts); none without it. */
  readonly dutyCycle?: LongReadDutyCycleLimits;
  readonly clock?: Clock;
  readonly statementTimeoutMs?: number;
  readonly lockTimeoutMs?: number;
  /** The process's share of the server's connections (connectionBudget.ts), shared with its other pools. */
  readonly budget?: ConnectionBudget;
  readonly pooler?: DatabasePooler;
}

/**
 * Where long reads run: exports (with proofs or without) and, later, log streams. They hold a connection for
 * as long as their client takes to read, so they get a pool of their own, apart from the one short reads
 * and writes use, and admission (LongReadSlots) keeps them within it. The pool has two connections per
 * slot, because an export with proofs reads on a second connection in the export's snapshot: an admitted
 * long read never waits for a connection, and a refused one is told so at once (429). What the pool does not
 * bound is the time long reads take from short requests on the event loop and Postgres' cores: they yield
 * to them, and while short requests are about they work only part of the time (`shortRequests`, `turns()`).
 */
export class LongReads {
  readonly db: Database;
  /** Where the pod's short requests are counted (the public app's middleware) for long reads to yield to. */
  readonly shortRequests: LongReadYield;
  readonly dutyCycle: LongReadDutyCycle;
  private readonly slots: LongReadSlots;

  constructor(options: LongReadsOptions) {
    this.slots = new LongReadSlots(options.limits, options.observer);
    const clock = options.clock;
    this.shortRequests = new LongReadYield(options.yieldLimits ?? { maxWaitMs: 0, maxShare: 0 }, undefined, clock && (() => clock.now()));
    this.dutyCycle = new LongReadDutyCycle(options.dutyCycle ?? { dutyCycle: 1, windowMs: 0 }, this.shortRequests, clock ?? systemClock);
    this.db = new Database({
      url: options.url,
      poolSize: LONG_READ_CONNECTIONS_PER_SLOT * options.limits.perInstance,
      applicationName: options.applicationName,
      log: options.log,
      statementTimeoutMs: options.statementTimeoutMs,
      lockTimeoutMs: options.lockTimeoutMs,
      budget: options.budget,
      pooler: options.pooler,
    });
  }

  /** A slot for one long read of the tenant, or TooManyLongReadsError (429 concurrent_exports). */
  admit(tenantId: string, what: string): LongReadSlot {
    return this.slots.take(tenantId, what);
  }

  /**
   * The turns of one long read: before each row it sends it lets the short requests in flight end first
   * (`turn`), and after each round trip of rows it keeps to its duty cycle (`roundTrip`).
   */
  turns(): LongReadTurns & LongReadPace {
    const turns = this.shortRequests.longRead();
    return { ...turns, ...this.dutyCycle.longRead(turns.waitedMs) };
  }

  inProgress(tenantId?: string): number {
    return this.slots.inProgress(tenantId);
  }

  close(): Promise<void> {
    return this.db.close();
  }
}

/** An export with proofs holds two connections: its own and the proofs' reader in the same snapshot. */
const LONG_READ_CONNECTIONS_PER_SLOT = 2;
