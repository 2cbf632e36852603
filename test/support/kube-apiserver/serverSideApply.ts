import { ApiError, type KubeObject } from './objectStore.ts';

/**
 * A simplified server-side apply: each field manager owns the leaf fields of the configurations it applied
 * (recorded in metadata.managedFields as FieldsV1); applying sets those fields, removes the ones the
 * manager owned and no longer applies, and fails with 409 Conflict when it would change a field another
 * manager owns, unless forced (then ownership moves). Simplified: lists are atomic, ownership is only
 * tracked for Apply operations (merge patches and updates take no ownership).
 */

type Paths = Set<string>;

function leafPaths(value: unknown, prefix: string[] = [], into: Paths = new Set()): Paths {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) leafPaths(child, [...prefix, key], into);
  } else if (prefix.length > 0) {
    into.add(JSON.stringify(prefix));
  }
  return into;
}

const valueAt = (object: unknown, path: string[]) =>
  path.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], object);

function setAt(object: Record<string, unknown>, path: string[], value: unknown): void {
  let node = object;
  for (const key of path.slice(0, -1)) {
    node[key] ??= {};
    node = node[key] as Record<string, unknown>;
  }
  node[path.at(-1)!] = structuredClone(value);
}

function deleteAt(object: Record<string, unknown>, path: string[]): void {
  const parent = valueAt(object, path.slice(0, -1)) as Record<string, unknown> | undefined;
  if (parent) delete parent[path.at(-1)!];
}

/** metadata.managedFields entries in the Kubernetes FieldsV1 form. */
function toFieldsV1(paths: Paths): Record<string, unknown> {
  const tree: Record<string, unknown> = {};
  for (const path of paths) {
    let node = tree;
    for (const key of JSON.parse(path) as string[]) {
      node[`f:${key}`] ??= {};
      node = node[`f:${key}`] as Record<string, unknown>;
    }
  }
  return tree;
}

function fromFieldsV1(tree: Record<string, unknown>, prefix: string[] = [], into: Paths = new Set()): Paths {
  const entries = Object.entries(tree);
  if (entries.length === 0 && prefix.length > 0) into.add(JSON.stringify(prefix));
  for (const [key, child] of entries) fromFieldsV1(child as Record<string, unknown>, [...prefix, key.slice(2)], into);
  return into;
}

/** Fields a configuration may own: identity and server-set metadata are not applied state. */
function appliedPaths(config: KubeObject): Paths {
  const { apiVersion: _apiVersion, kind: _kind, status: _status, metadata, ...rest } = config;
  const {
    name: _name,
    namespace: _namespace,
    resourceVersion: _rv,
    uid: _uid,
    managedFields: _mf,
    ...ownedMetadata
  } = metadata ?? ({} as KubeObject['metadata']);
  return leafPaths({ ...rest, ...(Object.keys(ownedMetadata).length > 0 ? { metadata: ownedMetadata } : {}) });
}

export function serverSideApply(current: KubeObject | undefined, config: KubeObject, manager: string, force: boolean): KubeObject {
  const managed =
    (current?.metadata.managedFields as Array<{ manager: string; operation: string; fieldsV1: Record<string, unknown> }> | undefined) ?? [];
  const owners = new Map(
    managed.filter((entry) => entry.operation === 'Apply').map((entry) => [entry.manager, fromFieldsV1(entry.fieldsV1)]),
  );
  const applied = appliedPaths(config);
  const result = structuredClone(
    current ?? ({ apiVersion: config.apiVersion, kind: config.kind, metadata: { name: config.metadata.name } } as KubeObject),
  ) as unknown as Record<string, unknown>;

  const conflicts: Array<{ field: string; message: string }> = [];
  for (const [owner, paths] of owners) {
    if (owner === manager) continue;
    for (const path of applied) {
      if (!paths.has(path)) continue;
      const keys = JSON.parse(path) as string[];
      if (JSON.stringify(valueAt(current, keys)) === JSON.stringify(valueAt(config, keys))) continue;
      if (force) paths.delete(path);
      else conflicts.push({ field: keys.join('.'), message: `conflict with "${owner}"` });
    }
  }
  if (conflicts.length > 0) {
    throw new ApiError(
      409,
      'Conflict',
      `Apply failed with ${conflicts.length} conflict(s): ${conflicts.map((conflict) => `${conflict.message}: .${conflict.field}`).join('; ')}`,
      conflicts,
    );
  }
  // Fields this manager applied before and applies no more are removed, unless another manager owns them.
  for (const path of owners.get(manager) ?? new Set<string>()) {
    if (applied.has(path) || [...owners].some(([owner, paths]) => owner !== manager && paths.has(path))) continue;
    deleteAt(result, JSON.parse(path));
  }
  for (const path of applied) setAt(result, JSON.parse(path), valueAt(config, JSON.parse(path)));
  owners.set(manager, applied);
  const object = result as unknown as KubeObject;
  object.metadata.managedFields = [
    ...managed.filter((entry) => entry.operation !== 'Apply'),
    ...[...owners]
      .filter(([, paths]) => paths.size > 0)
      .map(([owner, paths]) => ({
        manager: owner,
        operation: 'Apply',
        apiVersion: config.apiVersion,
        time: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
        fieldsType: 'FieldsV1',
        fieldsV1: toFieldsV1(paths),
      })),
  ];
  return object;
}
