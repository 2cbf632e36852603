import type { KubeConfig } from '@kubernetes/client-node';
import type { ApiKeyService } from '../auth/apiKeyService.ts';
import type { LegalHolds } from '../lifecycle/legalHolds.ts';
import type { RetentionPolicies } from '../lifecycle/retentionPolicies.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import type { ManagedStreams } from '../streams/managedStreams.ts';
import type { WebhookRegistry } from '../webhooks/webhookRegistry.ts';
import type { BackoffPolicy } from './backoff.ts';

/** What the controller role (src/roles/controllerRole.ts) gives KubernetesController: its services and settings. */

/**
 * Serialises the reconciles of one resource across every process on the deployment's database (main.ts
 * passes db/sessionLocks.ts). Two leaders for a moment — a Lease renamed by an upgrade, a leader that has
 * not yet noticed it lost its Lease — each mint what they find missing: without this, the second mints again,
 * or takes the first's key, minted but not yet in its Secret, for one nobody received and replaces it.
 */
interface ResourceLocks {
  /** Runs work holding the lock of `key`; does not run it (held: false) while another process holds it. */
  withLock<T>(key: string, work: () => Promise<T>): Promise<{ readonly held: true; readonly value: T } | { readonly held: false }>;
}

export interface ControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly keys: ApiKeyService;
  readonly registry: WebhookRegistry;
  readonly retention: RetentionPolicies;
  readonly holds: LegalHolds;
  /** The deployment-wide log streams AuditLogStream resources declare. */
  readonly streams: ManagedStreams;
  /** One lock per resource (its managed_by), on the same database as keys and registry. */
  readonly locks: ResourceLocks;
  /** The deployment's identity (readDeploymentId): stamped on every resource this controller reconciles. */
  readonly deploymentId: string;
  /** Only resources of this class (spec.controllerClass, absent meaning "default") are reconciled. */
  readonly controllerClass: string;
  /** Namespaces to watch; empty means all. */
  readonly namespaces: readonly string[];
  /** Refuse every resource of a namespace bound to no tenant (tenancy.ts); a bound namespace is always enforced. */
  readonly requireTenantBinding?: boolean;
  /** Where the leader-election Lease lives (the controller's own namespace). */
  readonly leaseNamespace: string;
  readonly leaseName: string;
  readonly identity?: string;
  readonly log: Logger;
  /** Every object is reconciled again this often, whatever the watch said (webhook status refreshes with it). */
  readonly resyncMs?: number;
  readonly workers?: number;
  readonly leaseTiming?: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  /** How a failed watch is restarted. */
  readonly watchBackoff?: BackoffPolicy;
  /** Where audit_controller_crd_outdated, _leader, _lease_errors_total and _reconcile_errors_total go. */
  readonly metrics?: ServiceMetrics;
  /** Told of every work-queue key processed (`apikeys/<namespace>/<name>`), whatever came of it: for tests and diagnostics. */
  readonly onReconciled?: (key: string) => void;
}
