import { NotificationListener } from '../db/notificationListener.ts';
import { LEAVES_APPENDED_CHANNEL } from '../integrity/sealStore.ts';
import type { Logger } from '../platform/logger.ts';

export interface LiveFeedOptions {
  /** LISTEN needs a connection of its own. */
  readonly databaseUrl: string;
  readonly log: Logger;
}

/**
 * What wakes live streams: one LISTEN connection per process for the sealer's notifications of appended
 * leaves (integrity/sealStore.ts), fanned out to the streams of the tenant named. A stream notes the
 * tenant's generation before it reads and waits for a later one, so a notification that arrives while it
 * reads is not lost. Notifications only make streams faster: when the connection drops (or comes back)
 * every stream is woken to read again, and a stream never waits longer than the timeout it passes.
 */
export class LiveFeed {
  private readonly listener: NotificationListener;
  private readonly generations = new Map<string, number>();
  private readonly waiters = new Map<string, Set<() => void>>();
  // Bumped for every tenant at once when notifications may have been missed.
  private epoch = 0;

  constructor(options: LiveFeedOptions) {
    this.listener = new NotificationListener({
      databaseUrl: options.databaseUrl,
      channel: LEAVES_APPENDED_CHANNEL,
      name: 'audit-trail live streams',
      log: options.log,
      onNotification: (tenantId) => {
        if (tenantId) this.wake(tenantId);
      },
      onGap: () => this.wakeAll(),
    });
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    this.wakeAll();
    return this.listener.stop();
  }

  /** Where the tenant's notifications stand: pass it to wait() to hear of any that arrive after this. */
  generation(tenantId: string): number {
    return this.epoch + (this.generations.get(tenantId) ?? 0);
  }

  /**
   * Resolves once leaves may have been appended to the tenant's tree since `seen` (at once if they may
   * have been already), after `timeoutMs`, or when `signal` aborts.
   */
  wait(tenantId: string, seen: number, timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (this.generation(tenantId) !== seen || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      let waiters = this.waiters.get(tenantId);
      if (!waiters) {
        waiters = new Set();
        this.waiters.set(tenantId, waiters);
      }
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        const current = this.waiters.get(tenantId);
        current?.delete(done);
        if (current?.size === 0) this.waiters.delete(tenantId);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal.addEventListener('abort', done, { once: true });
      waiters.add(done);
    });
  }

  private wake(tenantId: string): void {
    // Counted even when no stream waits: one may be reading, and must not wait for what it has not read.
    this.generations.set(tenantId, (this.generations.get(tenantId) ?? 0) + 1);
    for (const waiter of [...(this.waiters.get(tenantId) ?? [])]) waiter();
  }

  private wakeAll(): void {
    this.epoch += 1;
    for (const waiters of [...this.waiters.values()]) for (const waiter of [...waiters]) waiter();
  }
}
