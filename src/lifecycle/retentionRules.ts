import type { RetentionPeriod } from '../config/valueFormats.ts';

/**
 * Whether period `a` is at least as long as `b` from any starting date, the rule a locked policy's change
 * must pass: each part (months, days) at least as long, or `a` at its shortest (28-day months) at least
 * `b` at its longest (31-day months). `1y` and `12mo` are equal; `365d` is not at least `1y` (leap years),
 * so a locked `1y` cannot become `365d`. The same rule guards the table (audit_retention_at_least).
 */
export function isAtLeast(a: RetentionPeriod, b: RetentionPeriod): boolean {
  return (a.months >= b.months && a.days >= b.days) || a.months * 28 + a.days >= b.months * 31 + b.days;
}
