import { kubeTimeText } from './kubeTime.ts';
import { systemClock } from '../platform/clock.ts';

/** metav1.Condition, as status.conditions holds them. */
export interface Condition {
  readonly type: string;
  readonly status: 'True' | 'False' | 'Unknown';
  readonly observedGeneration?: number;
  readonly lastTransitionTime: string;
  readonly reason: string;
  readonly message: string;
}

/**
 * Where a resource stands, in the terms of kstatus (what Flux and `kubectl wait` read):
 * - `Ready`: the spec is carried out, including a settled state such as a key revoked on purpose;
 *   Ready=True, no Reconciling, no Stalled.
 * - `Stalled`: the controller cannot get there without someone changing something (an invalid spec, a
 *   Secret name taken by someone else, an endpoint disabled after failures); Ready=False and Stalled=True,
 *   so that health checks fail at once rather than wait for their timeout.
 * - `Reconciling`: the controller is still working on it (retrying after an error); Reconciling=True,
 *   Ready left as it was (Unknown on a resource that never had it).
 */
export interface Health {
  readonly state: 'Ready' | 'Stalled' | 'Reconciling';
  readonly reason: string;
  readonly message: string;
}

/**
 * Sets a condition in place (its position kept, so an unchanged list compares equal), keeping
 * lastTransitionTime when the status did not change (the Kubernetes API conventions: it marks
 * transitions, not updates).
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  next: Omit<Condition, 'lastTransitionTime'>,
  now = new Date(systemClock.now()),
): Condition[] {
  const list = conditions ?? [];
  const existing = list.find((condition) => condition.type === next.type);
  const condition = {
    ...next,
    lastTransitionTime: existing && existing.status === next.status ? existing.lastTransitionTime : kubeTimeText(now.getTime()),
  };
  return existing ? list.map((item) => (item === existing ? condition : item)) : [...list, condition];
}

function withoutCondition(conditions: readonly Condition[], type: string): Condition[] {
  return conditions.filter((condition) => condition.type !== type);
}

/** The Ready, Stalled and Reconciling conditions for `health`; the two abnormal ones are present only while true. */
export function healthConditions(
  conditions: readonly Condition[] | undefined,
  health: Health,
  observedGeneration: number | undefined,
  now = new Date(systemClock.now()),
): Condition[] {
  const { reason, message } = health;
  const generation = observedGeneration === undefined ? {} : { observedGeneration };
  let result = [...(conditions ?? [])];
  if (health.state === 'Reconciling') {
    if (!result.some((condition) => condition.type === 'Ready'))
      result = setCondition(result, { type: 'Ready', status: 'Unknown', reason, message, ...generation }, now);
    return withoutCondition(setCondition(result, { type: 'Reconciling', status: 'True', reason, message, ...generation }, now), 'Stalled');
  }
  const ready = health.state === 'Ready';
  result = setCondition(result, { type: 'Ready', status: ready ? 'True' : 'False', reason, message, ...generation }, now);
  result = withoutCondition(result, 'Reconciling');
  return ready
    ? withoutCondition(result, 'Stalled')
    : setCondition(result, { type: 'Stalled', status: 'True', reason, message, ...generation }, now);
}

export function conditionOf(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((condition) => condition.type === type);
}
