type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Compares JSON values as values: key order is irrelevant (the API server returns custom resources sorted). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, index) => jsonEqual(item, b[index]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a).filter((key) => a[key] !== undefined);
    return keys.length === Object.keys(b).filter((key) => b[key] !== undefined).length && keys.every((key) => jsonEqual(a[key], b[key]));
  }
  return a === b;
}

/**
 * The JSON merge patch (RFC 7386) that turns `current` into `desired`, or undefined when they are equal.
 * A field `desired` no longer has becomes an explicit null: a merge patch keeps whatever it does not name.
 * Arrays are replaced whole, as merge patches do.
 */
export function mergePatchDiff(current: unknown, desired: Record<string, unknown>): Record<string, Json> | undefined {
  const base = isObject(current) ? current : {};
  const patch: Record<string, Json> = {};
  for (const [key, value] of Object.entries(desired)) {
    if (value === undefined || jsonEqual(base[key], value)) continue;
    if (isObject(value) && isObject(base[key])) patch[key] = mergePatchDiff(base[key], value) ?? {};
    else patch[key] = value as Json;
  }
  for (const key of Object.keys(base)) {
    if (base[key] !== undefined && desired[key] === undefined) patch[key] = null;
  }
  return Object.keys(patch).length === 0 ? undefined : patch;
}
