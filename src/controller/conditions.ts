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
 * Sets a condition, keeping lastTransitionTime when the status did not change (the Kubernetes API
 * conventions: it marks transitions, not updates).
 */
export function setCondition(conditions: readonly Condition[] | undefined, next: Omit<Condition, 'lastTransitionTime'>, now = new Date()): Condition[] {
  const existing = conditions?.find((condition) => condition.type === next.type);
  const lastTransitionTime = existing && existing.status === next.status ? existing.lastTransitionTime : now.toISOString().replace(/\.\d{3}Z$/, 'Z');
  return [...(conditions ?? []).filter((condition) => condition.type !== next.type), { ...next, lastTransitionTime }];
}
