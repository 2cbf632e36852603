import type { Actor } from '../events/adminEvent.ts';
import type { LegalHolds } from '../lifecycle/legalHolds.ts';
import { checkInput } from '../platform/inputValidation.ts';
import type { DeploymentGuard } from './deploymentGuard.ts';
import { reportHealth } from './healthReport.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { involvedObject, managedByOf, type CustomResource, type KubeResources } from './kubeResources.ts';
import { LEGAL_HOLD, legalHoldSpecSchema, type LegalHoldSpec } from './lifecycleKinds.ts';
import { declaredHold, holding } from './legalHoldStatus.ts';

/** Holds deletion of a LegalHold until its release is recorded (the row's released_at and the trail's event). */
export const LEGAL_HOLD_FINALIZER = 'audittrail.dev/release-hold';

type Status = { holdId?: string; placedAt?: string };
export type LegalHoldObject = CustomResource<LegalHoldSpec, Status>;

export interface LegalHoldReconcilerOptions {
  readonly resources: KubeResources;
  readonly holds: LegalHolds;
  readonly events: EventRecorder;
  readonly guard: DeploymentGuard;
}

/**
 * Places the hold a LegalHold resource declares (once: its spec is immutable) and releases it when the
 * resource is deleted, through a finalizer, so that a release is always recorded before the resource goes.
 */
export class LegalHoldReconciler {
  private readonly options: LegalHoldReconcilerOptions;

  constructor(options: LegalHoldReconcilerOptions) {
    this.options = options;
  }

  async reconcile(informed: LegalHoldObject): Promise<void> {
    const { resources, guard, holds, events } = this.options;
    const cached = resources.freshest(informed);
    if (!(await guard.mayAct(cached))) return;
    const managedBy = managedByOf(cached);
    const actor: Actor = { userId: `kubernetes:${cached.metadata.namespace}/${cached.metadata.name}`, userRole: 'controller' };

    if (cached.metadata.deletionTimestamp) {
      if (!cached.metadata.finalizers?.includes(LEGAL_HOLD_FINALIZER)) return;
      const released = await holds.release(managedBy, actor);
      await resources.removeFinalizer(LEGAL_HOLD.plural, cached, LEGAL_HOLD_FINALIZER);
      if (released) await events.record(involvedObject(cached), 'Normal', 'HoldReleased', `Legal hold ${released.id} released.`);
      return;
    }
    const object = await guard.claim(LEGAL_HOLD.plural, cached, LEGAL_HOLD_FINALIZER);
    const parsed = checkInput(legalHoldSpecSchema, object.spec, 'spec');
    if (!parsed.success) {
      const message = parsed.error.details.map((detail) => `${detail.field}: ${detail.message}`).join('; ');
      return reportHealth(
        resources,
        events,
        LEGAL_HOLD.plural,
        object,
        { ...object.status },
        { state: 'Stalled', reason: 'InvalidSpec', message },
      );
    }
    const { hold, placed } = await holds.place(declaredHold(parsed.data), managedBy, actor);
    if (placed)
      await events.record(involvedObject(object), 'Normal', 'HoldPlaced', `Legal hold ${hold.id} placed on tenant ${hold.tenantId}.`);
    const { status, health } = holding(hold);
    return reportHealth(resources, events, LEGAL_HOLD.plural, object, status, health);
  }
}
