import { ArchiveStore } from '../lifecycle/archiveStore.ts';
import { Expiry } from '../lifecycle/expiry.ts';
import { RetentionPolicies } from '../lifecycle/retentionPolicies.ts';
import type { Role } from './role.ts';
import { DutyCycle } from '../platform/dutyCycle.ts';
import { expiryMetrics } from '../lifecycle/expiryMetrics.ts';

/**
 * The retention role: an expiry pass every RETENTION_INTERVAL (docs/retention.md "Expiry"). A role of its
 * own rather than a part of the sealer: the sealer's loop is latency-bound (every event gets its leaf within
 * SEAL_INTERVAL) and holds the signing key, while a pass is long, bulky database work that is better
 * scheduled, scaled and stopped on its own (or replaced by a CronJob running `audit-trail retention run`).
 * Two processes running it are safe: each batch is its own transaction and removes only what is still there.
 */
export const role: Role = {
  async start(parts) {
    const { config, db, metrics } = parts;
    const log = parts.log.child({ role: 'retention' });
    const writer = await parts.writer();
    const archiveStore = new ArchiveStore(config.retention.archiveStore);
    // AuditTrailRetentionFailing takes increase() of these, which sees nothing of a series that first appears at 1.
    expiryMetrics(metrics).runs.inc({ outcome: 'failed' }, 0);
    expiryMetrics(metrics).archives.inc({ outcome: 'failed' }, 0);
    const expiry = new Expiry({
      db,
      writer,
      policies: new RetentionPolicies({ db, writer, defaultPeriod: config.retentionDefault }),
      batchSize: config.retention.batchSize,
      dutyCycle: new DutyCycle(config.retention.dutyCycle),
      actor: { userId: 'retention', userRole: 'service' },
      log,
      metrics,
      archiveStore,
    });
    let stopped = false;
    let inFlight = false;
    let running: Promise<unknown> = Promise.resolve();
    // A pass longer than the interval is not overlapped by the next: that one is skipped.
    const pass = () => {
      if (stopped || inFlight) return;
      inFlight = true;
      running = expiry
        .run()
        .catch((error: unknown) => log.error({ err: error }, 'expiry pass failed; retried at the next interval'))
        .finally(() => {
          inFlight = false;
        });
    };
    const timer = setInterval(pass, config.retention.intervalMs);
    pass();
    parts.releasers.add('retention', async () => {
      stopped = true;
      clearInterval(timer);
      await running;
      await archiveStore.close();
    });
    return {};
  },
};
