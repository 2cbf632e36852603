import { KubeConfig } from '@kubernetes/client-node';
import { ApiKeyService } from '../auth/apiKeyService.ts';
import { requireSetting } from '../config/config.ts';
import { KubernetesController } from '../controller/controller.ts';
import { LegalHolds } from '../lifecycle/legalHolds.ts';
import { RetentionPolicies } from '../lifecycle/retentionPolicies.ts';
import { CONTROLLED_RESOURCE_LOCKS, SessionLocks } from '../db/sessionLocks.ts';
import { ManagedStreams } from '../streams/managedStreams.ts';
import type { Role } from './role.ts';

/**
 * The Kubernetes controller: ApiKey, WebhookEndpoint, RetentionPolicy, LegalHold and AuditLogStream resources into
 * Postgres and Secrets, leader-elected.
 * This module is loaded only for this role (main.ts): the Kubernetes client is by far the largest part of
 * a process's memory (BENCHMARKS.md, "List (issue 2)", RSS).
 */
export const role: Role = {
  async start(parts) {
    const { config, db } = parts;
    const pepper = requireSetting(config.keyPepper, 'KEY_PEPPER', 'the controller role');
    const writer = await parts.writer();
    const controller = new KubernetesController({
      kubeConfig: parts.kubeConfig ?? defaultKubeConfig(),
      keys: new ApiKeyService({ db, writer, pepper, environment: config.keyEnvironment }),
      registry: await parts.webhookRegistry('the controller role'),
      retention: new RetentionPolicies({ db, writer, defaultPeriod: config.retentionDefault }),
      holds: new LegalHolds({ db, writer }),
      streams: new ManagedStreams({
        db,
        secrets: parts.secretBox('the controller role'),
        policy: { allowHttp: config.webhookAllowHttp, allowPrivateTargets: config.webhookAllowPrivateTargets },
      }),
      // Each reconcile holds its resource's lock in this database: two leaders for a moment never mint twice.
      locks: new SessionLocks(parts.sessionDb(), CONTROLLED_RESOURCE_LOCKS),
      deploymentId: await parts.deploymentId(),
      controllerClass: config.controllerClass,
      namespaces: config.controllerNamespaces,
      requireTenantBinding: config.controllerRequireTenantBinding,
      leaseNamespace: config.podNamespace ?? 'default',
      leaseName: config.controllerLeaseName,
      identity: config.podName,
      log: parts.log.child({ role: 'controller' }),
      resyncMs: config.controllerResyncMs,
      leaseTiming: config.controllerLease,
      metrics: parts.metrics,
    });
    controller.start();
    parts.releasers.add('kubernetes controller', () => controller.stop());
    // Not ready while its CRDs are older than it needs (a rollout with stale CRDs stops at its first pod), nor
    // while it cannot reach its Lease.
    return { readiness: [...controller.readiness] };
  },
};

/** In-cluster credentials, or KUBECONFIG outside a cluster. */
function defaultKubeConfig(): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  return kubeConfig;
}
