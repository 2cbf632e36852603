import { conditionOf, healthConditions, type Health } from './conditions.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { involvedObject, type CustomResource, type KubeResources } from './kubeResources.ts';

type AnyResource = CustomResource<unknown, Record<string, unknown>>;

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
  const wasAlready = before?.reason === health.reason && (health.state === 'Reconciling' ? before.status === 'True' : before.status === 'False');
  if (!wasAlready) await events.record(involvedObject(object), 'Warning', health.reason, health.message);
}
