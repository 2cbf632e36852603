import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { statusOf } from './kubeClients.ts';
import { LeaderElector, type LeaseStore } from './leaderElection.ts';
import { controllerMetrics } from './controllerMetrics.ts';

/**
 * Leadership that cannot fail silently: the controller's LeaderElector wired to what an operator watches. A
 * replica that cannot read, take or renew its Lease shows audit_controller_leader 0 (the chart alerts when no
 * replica of a release leads), counts its failed tries, fails its readiness naming the Lease and the API
 * server's reason, and says so in its log once per outage, not once per try.
 */
export interface LeadershipOptions {
  readonly identity: string;
  readonly store: LeaseStore;
  readonly leaseNamespace: string;
  readonly leaseName: string;
  readonly timing: { readonly leaseDurationMs: number; readonly renewDeadlineMs: number; readonly retryPeriodMs: number };
  readonly metrics?: ServiceMetrics;
  readonly log: Logger;
  readonly onStartedLeading: () => void;
  readonly onStoppedLeading: () => void;
}

export interface Leadership {
  readonly elector: LeaderElector;
  /** Fails while the Lease has never been reached, or not for a lease duration. */
  readonly readiness: { readonly name: string; readonly check: () => Promise<void> };
}

export function leadership(options: LeadershipOptions): Leadership {
  const { log, timing } = options;
  const metrics = options.metrics && controllerMetrics(options.metrics);
  const lease = { lease: options.leaseName };
  const where = `Lease ${options.leaseNamespace}/${options.leaseName}`;
  // Exported from the start, so that the alert sees a release without a leader (at 0), and increase() the
  // first failed try (it sees nothing of a series that first appears at 1).
  metrics?.leader.set(lease, 0);
  metrics?.leaseErrors.inc(lease, 0);
  const elector = new LeaderElector({
    identity: options.identity,
    store: options.store,
    ...timing,
    onStartedLeading: () => {
      metrics?.leader.set(lease, 1);
      options.onStartedLeading();
    },
    onStoppedLeading: () => {
      metrics?.leader.set(lease, 0);
      options.onStoppedLeading();
    },
    onError: (error, inARow) => {
      metrics?.leaseErrors.inc(lease);
      // Once per outage: the tries go on every retry period, and the metric and readiness keep saying so.
      if (inARow === 1) log.warn({ err: error }, `cannot reach the ${where}: ${describeLeaseError(error)}; retrying`);
    },
    onReached: (failures) => log.info({ failed_tries: failures }, `the ${where} is reachable again`),
  });
  const readiness = {
    name: 'leader-election',
    check: async (): Promise<void> => {
      const { reachedAgoMs, lastError } = elector.contact;
      const why = lastError ? `: ${describeLeaseError(lastError)}` : '';
      if (reachedAgoMs === undefined) throw new Error(`the ${where} has not been reached yet${why}`);
      if (reachedAgoMs > timing.leaseDurationMs)
        throw new Error(`the ${where} has not been reached for ${Math.round(reachedAgoMs / 1000)} s${why}`);
    },
  };
  return { elector, readiness };
}

/** What a failed try at the Lease was: the API server's Status reason and message, or the transport's error. */
function describeLeaseError(error: Error): string {
  const { code, body } = error as { code?: unknown; body?: unknown };
  if (typeof code !== 'number') return error.message;
  const { reason, message } = statusOf(body);
  return `the Kubernetes API answered ${code} ${reason}${message ? `: ${message}` : ''}`;
}
