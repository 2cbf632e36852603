import type { KubernetesObject } from '@kubernetes/client-node';
import type { ApiKeyService } from '../auth/apiKeyService.ts';
import type { LegalHolds } from '../lifecycle/legalHolds.ts';
import type { RetentionPolicies } from '../lifecycle/retentionPolicies.ts';
import type { Logger } from '../platform/logger.ts';
import type { ManagedStreams } from '../streams/managedStreams.ts';
import type { WebhookRegistry } from '../webhooks/webhookRegistry.ts';
import { ApiKeyReconciler, type ApiKeyObject } from './apiKeyReconciler.ts';
import { AuditLogStreamReconciler, type AuditLogStreamObject } from './auditLogStreamReconciler.ts';
import type { DeploymentGuard } from './deploymentGuard.ts';
import type { EventRecorder } from './kubeEvents.ts';
import type { KubeResources } from './kubeResources.ts';
import { LegalHoldReconciler, type LegalHoldObject } from './legalHoldReconciler.ts';
import { LEGAL_HOLD, RETENTION_POLICY } from './lifecycleKinds.ts';
import { API_KEY, type ResourceKind } from './resources.ts';
import { WEBHOOK_ENDPOINT } from './webhookEndpointResource.ts';
import { RetentionPolicyReconciler, type RetentionPolicyObject } from './retentionPolicyReconciler.ts';
import { AUDIT_LOG_STREAM } from './streamResource.ts';
import { WebhookEndpointReconciler } from './webhookEndpointReconciler.ts';
import type { WebhookEndpointObject } from './webhookEndpointState.ts';

/** A kind the controller watches, and how one of its objects is reconciled. */
export interface Kind {
  readonly resource: ResourceKind;
  reconcile(object: KubernetesObject): Promise<void>;
}

/** The domain services the reconcilers act on, and the Kubernetes side they share. */
export interface KindDependencies {
  readonly resources: KubeResources;
  readonly events: EventRecorder;
  readonly guard: DeploymentGuard;
  readonly keys: ApiKeyService;
  readonly registry: WebhookRegistry;
  readonly retention: RetentionPolicies;
  readonly holds: LegalHolds;
  readonly streams: ManagedStreams;
  readonly log: Logger;
}

/** Every kind of the group with its reconciler. */
export function controllerKinds(deps: KindDependencies): Kind[] {
  const { resources, events, guard, log } = deps;
  const apiKeys = new ApiKeyReconciler({ resources, keys: deps.keys, events, guard, log });
  const webhooks = new WebhookEndpointReconciler({ resources, registry: deps.registry, events, guard, log });
  const retention = new RetentionPolicyReconciler({ resources, policies: deps.retention, events, guard });
  const holds = new LegalHoldReconciler({ resources, holds: deps.holds, events, guard });
  const streams = new AuditLogStreamReconciler({ resources, streams: deps.streams, events, guard });
  return [
    { resource: API_KEY, reconcile: (object) => apiKeys.reconcile(object as unknown as ApiKeyObject) },
    { resource: WEBHOOK_ENDPOINT, reconcile: (object) => webhooks.reconcile(object as unknown as WebhookEndpointObject) },
    { resource: RETENTION_POLICY, reconcile: (object) => retention.reconcile(object as unknown as RetentionPolicyObject) },
    { resource: LEGAL_HOLD, reconcile: (object) => holds.reconcile(object as unknown as LegalHoldObject) },
    { resource: AUDIT_LOG_STREAM, reconcile: (object) => streams.reconcile(object as unknown as AuditLogStreamObject) },
  ];
}
