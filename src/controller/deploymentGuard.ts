import type { EventRecorder } from './kubeEvents.ts';
import { involvedObject, type AnyResource, type KubeResources } from './kubeResources.ts';
import { DEPLOYMENT_ANNOTATION } from './resources.ts';

/**
 * The second guard after the controller class: a resource is stamped with the id of the deployment whose
 * controller first reconciled it, and no other deployment acts on it — not its keys, Secret, status or
 * finalizer — so two releases misconfigured with one class still cannot mint, revoke or rewrite each
 * other's keys. The other deployment records a Warning Event instead.
 */
export class DeploymentGuard {
  private readonly resources: KubeResources;
  private readonly events: EventRecorder;
  private readonly deploymentId: string;

  constructor(resources: KubeResources, events: EventRecorder, deploymentId: string) {
    this.resources = resources;
    this.events = events;
    this.deploymentId = deploymentId;
  }

  /** Whether this deployment may act on the object: not stamped yet, or stamped by this deployment. */
  async mayAct(object: AnyResource): Promise<boolean> {
    const owner = object.metadata.annotations?.[DEPLOYMENT_ANNOTATION];
    if (owner === undefined || owner === this.deploymentId) return true;
    await this.events.record(
      involvedObject(object),
      'Warning',
      'OwnedByAnotherDeployment',
      `Reconciled by the audit-trail deployment ${owner}, not by this one (${this.deploymentId}), which leaves it alone. ` +
        `Two releases share a controller class: give each its own (Helm value controller.class, spec.controllerClass).`,
    );
    return false;
  }

  /** Claimed by this deployment: its status is this controller's to write. */
  hasClaimed(object: AnyResource): boolean {
    return object.metadata.annotations?.[DEPLOYMENT_ANNOTATION] === this.deploymentId;
  }

  /** Stamps the object for this deployment and adds the finalizer (a no-op once done); see KubeResources.claim. */
  claim<T extends AnyResource>(plural: string, object: T, finalizer: string): Promise<T> {
    return this.resources.claim(plural, object, this.deploymentId, finalizer);
  }
}
