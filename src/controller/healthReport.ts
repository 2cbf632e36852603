import { conditionOf, healthConditions, type Health } from './conditions.ts';
import type { DeploymentGuard } from './deploymentGuard.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { involvedObject, type AnyResource, type KubeResources } from './kubeResources.ts';

/**
 * Writes a resource's status — its kind's own fields, observedGeneration and the kstatus conditions for
 * `health` — when it differs from what the object shows, and records a Warning Event when the resource
 * enters a problem it was not in before (the recorder aggregates repeats).
 */
export async function reportHealth(
  resources: KubeResources,
  events: EventRecorder,
  plural: string,
  object: AnyResource,
  fields: Record<string, unknown>,
  health: Health,
): Promise<void> {
  // A failed attempt has not observed the generation: what was observed before stays.
  const observedGeneration = health.state === 'Reconciling' ? object.status?.observedGeneration : object.metadata.generation;
  const status = { ...fields, observedGeneration, conditions: healthConditions(object.status?.conditions, health, observedGeneration) };
  const changed = await resources.setStatus(plural, object, status);
  if (!changed || health.state === 'Ready') return;
  const type = health.state === 'Stalled' ? 'Ready' : 'Reconciling';
  const before = conditionOf(object.status?.conditions, type);
  const wasAlready =
    before?.reason === health.reason && (health.state === 'Reconciling' ? before.status === 'True' : before.status === 'False');
  if (!wasAlready) await events.record(involvedObject(object), 'Warning', health.reason, health.message);
}

/**
 * A failed reconcile, shown while the controller retries (kstatus: Reconciling=True): only on a resource
 * this deployment has claimed, and not once it is being deleted.
 */
export async function reportRetry(
  resources: KubeResources,
  events: EventRecorder,
  guard: DeploymentGuard,
  plural: string,
  informed: AnyResource,
  message: string,
): Promise<void> {
  const object = resources.freshest(informed);
  if (!guard.hasClaimed(object) || object.metadata.deletionTimestamp) return;
  await reportHealth(
    resources,
    events,
    plural,
    object,
    { ...object.status },
    { state: 'Reconciling', reason: 'RetryingAfterError', message },
  );
}

/**
 * A resource the controller will not act on until someone changes something outside it (kstatus:
 * Stalled=True): only on a resource this deployment may act on (not claimed by another).
 */
export async function reportStalled(
  resources: KubeResources,
  events: EventRecorder,
  guard: DeploymentGuard,
  plural: string,
  informed: AnyResource,
  reason: string,
  message: string,
): Promise<void> {
  const object = resources.freshest(informed);
  if (!(await guard.mayAct(object))) return;
  await reportHealth(resources, events, plural, object, { ...object.status }, { state: 'Stalled', reason, message });
}

/** What status may say about a failure: never a response body (it could echo what was sent). */
export function describeError(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'number') return `the Kubernetes API answered ${code}`;
  if (error instanceof Error) return `${error.name}: ${error.message.slice(0, 200)}`;
  return 'unknown error';
}
