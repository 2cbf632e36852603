import { parseRetentionPeriod } from '../config/valueFormats.ts';
import type { Actor } from '../events/adminEvent.ts';
import type { RetentionPolicies } from '../lifecycle/retentionPolicies.ts';
import type { RetentionPolicyRecord } from '../lifecycle/retentionStore.ts';
import { checkInput } from '../platform/inputValidation.ts';
import type { Health } from './conditions.ts';
import { appliedMessage, policyHealth, policyStatus } from './retentionPolicyStatus.ts';
import type { DeploymentGuard } from './deploymentGuard.ts';
import { reportHealth } from './healthReport.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { involvedObject, managedByOf, type CustomResource, type KubeResources } from './kubeResources.ts';
import { RETENTION_POLICY, retentionPolicySpecSchema, type RetentionPolicySpec } from './lifecycleKinds.ts';

/** Holds deletion of a RetentionPolicy until its policy is removed from the database (never, while locked). */
export const RETENTION_POLICY_FINALIZER = 'audittrail.dev/retention-policy';

type Status = { enforced?: string; locked?: boolean };
export type RetentionPolicyObject = CustomResource<RetentionPolicySpec, Status>;

export interface RetentionPolicyReconcilerOptions {
  readonly resources: KubeResources;
  readonly policies: RetentionPolicies;
  readonly events: EventRecorder;
  readonly guard: DeploymentGuard;
}

/**
 * Brings one RetentionPolicy resource and the tenant's stored policy together. A change a locked policy
 * forbids (shorter, unlocked, deleted) is refused: the resource says why (Ready=False, Stalled=True, a
 * Warning Event with the reason) and status.enforced keeps showing the locked period, which goes on
 * applying. A deleted locked policy keeps its finalizer, so the resource stays (Terminating) as the visible
 * record of what is enforced; lengthening it is still possible.
 */
export class RetentionPolicyReconciler {
  private readonly options: RetentionPolicyReconcilerOptions;

  constructor(options: RetentionPolicyReconcilerOptions) {
    this.options = options;
  }

  async reconcile(informed: RetentionPolicyObject): Promise<void> {
    const { resources, guard, policies } = this.options;
    const cached = resources.freshest(informed);
    if (!(await guard.mayAct(cached))) return;
    const managedBy = managedByOf(cached);
    const actor: Actor = { userId: `kubernetes:${cached.metadata.namespace}/${cached.metadata.name}`, userRole: 'controller' };

    if (cached.metadata.deletionTimestamp) {
      if (!cached.metadata.finalizers?.includes(RETENTION_POLICY_FINALIZER)) return;
      const outcome = await policies.release(managedBy, actor);
      if (outcome.kind === 'refused') {
        return this.report(cached, outcome.enforced, { state: 'Stalled', reason: outcome.reason, message: outcome.message });
      }
      await resources.removeFinalizer(RETENTION_POLICY.plural, cached, RETENTION_POLICY_FINALIZER);
      if (outcome.kind === 'removed')
        await this.options.events.record(
          involvedObject(cached),
          'Normal',
          'PolicyRemoved',
          `Retention policy of ${cached.spec.tenantId} removed.`,
        );
      return;
    }
    const object = await guard.claim(RETENTION_POLICY.plural, cached, RETENTION_POLICY_FINALIZER);

    const parsed = checkInput(retentionPolicySpecSchema, object.spec, 'spec');
    const period = parsed.success ? parseRetentionPeriod(parsed.data.retain) : undefined;
    if (!parsed.success || !period) {
      const message = parsed.success
        ? 'spec.retain: must be at most 100 years'
        : parsed.error.details.map((detail) => `${detail.field}: ${detail.message}`).join('; ');
      return this.report(object, undefined, { state: 'Stalled', reason: 'InvalidSpec', message }, object.status);
    }
    const spec = parsed.data;
    const outcome = await policies.declare(
      { tenantId: spec.tenantId, period, locked: spec.locked ?? false, archive: spec.archive ?? null },
      managedBy,
      actor,
    );
    if (outcome.kind === 'refused') {
      return this.report(object, outcome.enforced, { state: 'Stalled', reason: outcome.reason, message: outcome.message });
    }
    const policy = outcome.policy;
    const applied = appliedMessage(outcome);
    if (applied) await this.options.events.record(involvedObject(object), 'Normal', 'PolicyApplied', applied);
    const archiveFailure = policy.archive ? await policies.archiveFailure(policy.tenantId) : undefined;
    return this.report(object, policy, policyHealth(policy, archiveFailure));
  }

  private report(
    object: RetentionPolicyObject,
    enforced: RetentionPolicyRecord | undefined,
    health: Health,
    previous?: Status,
  ): Promise<void> {
    return reportHealth(
      this.options.resources,
      this.options.events,
      RETENTION_POLICY.plural,
      object,
      policyStatus(enforced, previous),
      health,
    );
  }
}
