import { randomUUID } from 'node:crypto';

/**
 * Storage of the Kubernetes API stand-in, with the semantics controllers rely on: one global
 * resourceVersion counter (as etcd's revision), generation bumped only by spec changes, optimistic
 * concurrency, finalizers holding deletion back, owner-reference garbage collection, and a bounded event
 * history for watches (older resourceVersions get 410 Gone, as after an etcd compaction).
 */

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    deletionGracePeriodSeconds?: number;
    finalizers?: string[];
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export interface WatchEvent {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly object: KubeObject;
  /** For MODIFIED: the object before the change (watches with a selector need it). */
  readonly previous?: KubeObject;
  readonly resourceVersion: number;
  /** The collection the object belongs to, e.g. `audittrail.dev/v1alpha1/apikeys`. */
  readonly collection: string;
}

/** A refusal, answered as a metav1.Status: details name the object (422) and list the causes, field by field. */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly causes: Array<{ field: string; message: string; reason?: string }>;
  readonly details: { name: string; group: string; kind: string } | undefined;

  constructor(
    code: number,
    reason: string,
    message: string,
    causes: Array<{ field: string; message: string; reason?: string }> = [],
    details?: { name: string; group: string; kind: string },
  ) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.causes = causes;
    this.details = details;
  }
}

const HISTORY_LIMIT = 10_000;
const clone = <T>(value: T): T => structuredClone(value);

export class ObjectStore {
  private revision = 1;
  private readonly objects = new Map<string, { collection: string; object: KubeObject }>();
  private history: WatchEvent[] = [];
  /** Oldest resourceVersion a watch may start from. */
  private compactedThrough = 0;
  private readonly listeners = new Set<(event: WatchEvent) => void>();

  get currentRevision(): number {
    return this.revision;
  }

  private static key(collection: string, namespace: string | undefined, name: string): string {
    return `${collection}|${namespace ?? ''}|${name}`;
  }

  get(collection: string, namespace: string | undefined, name: string): KubeObject {
    const entry = this.objects.get(ObjectStore.key(collection, namespace, name));
    if (!entry) throw new ApiError(404, 'NotFound', `${collection.split('/').at(-1)} "${name}" not found`);
    return clone(entry.object);
  }

  list(collection: string, namespace: string | undefined): KubeObject[] {
    return [...this.objects.values()]
      .filter((entry) => entry.collection === collection && (namespace === undefined || entry.object.metadata.namespace === namespace))
      .map((entry) => clone(entry.object));
  }

  create(collection: string, object: KubeObject, options: { generation: boolean }): KubeObject {
    const key = ObjectStore.key(collection, object.metadata.namespace, object.metadata.name);
    if (this.objects.has(key))
      throw new ApiError(409, 'AlreadyExists', `${collection.split('/').at(-1)} "${object.metadata.name}" already exists`);
    const stored = clone(object);
    stored.metadata.uid = randomUUID();
    stored.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    if (options.generation) stored.metadata.generation = 1;
    delete stored.metadata.deletionTimestamp;
    return this.write(collection, key, stored, 'ADDED');
  }

  /**
   * Replaces an object. `expectedVersion` (the caller's metadata.resourceVersion) must be current when given.
   * `keep` names the top-level fields the write may not change (status on the main resource, everything
   * but status on /status).
   */
  update(collection: string, object: KubeObject, options: { generation: boolean; statusOnly: boolean }): KubeObject {
    const key = ObjectStore.key(collection, object.metadata.namespace, object.metadata.name);
    const current = this.objects.get(key)?.object;
    if (!current) throw new ApiError(404, 'NotFound', `${collection.split('/').at(-1)} "${object.metadata.name}" not found`);
    const expected = object.metadata.resourceVersion;
    if (expected !== undefined && expected !== '' && expected !== current.metadata.resourceVersion) {
      throw new ApiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${collection.split('/').at(-1)} "${object.metadata.name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    }
    let next: KubeObject;
    if (options.statusOnly) {
      next = clone(current);
      next.status = clone(object.status);
    } else {
      next = clone(object);
      if ('status' in current) next.status = clone(current.status);
      else delete next.status;
      // Immutable and server-owned metadata.
      for (const field of ['uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'generation'] as const) {
        if (current.metadata[field] === undefined) delete next.metadata[field];
        else next.metadata[field] = current.metadata[field] as never;
      }
      if (current.metadata.deletionTimestamp) {
        const added = (next.metadata.finalizers ?? []).filter((finalizer) => !(current.metadata.finalizers ?? []).includes(finalizer));
        if (added.length > 0)
          throw new ApiError(422, 'Invalid', 'finalizers cannot be added to an object being deleted', [
            { field: 'metadata.finalizers', message: 'Forbidden: no new finalizers can be added if the object is being deleted' },
          ]);
      }
      if (options.generation && canonical(specOf(current)) !== canonical(specOf(next))) {
        next.metadata.generation = (current.metadata.generation ?? 1) + 1;
      }
    }
    // A write that changes nothing (compared as values, whatever the key order) is a no-op: no new
    // resourceVersion, no watch event.
    if (canonical(next) === canonical({ ...current, metadata: { ...current.metadata, resourceVersion: next.metadata.resourceVersion } })) {
      return clone(current);
    }
    if (next.metadata.deletionTimestamp && (next.metadata.finalizers ?? []).length === 0) {
      return this.remove(collection, key, next);
    }
    return this.write(collection, key, next, 'MODIFIED');
  }

  delete(collection: string, namespace: string | undefined, name: string): KubeObject {
    const key = ObjectStore.key(collection, namespace, name);
    const current = this.objects.get(key)?.object;
    if (!current) throw new ApiError(404, 'NotFound', `${collection.split('/').at(-1)} "${name}" not found`);
    if ((current.metadata.finalizers ?? []).length > 0) {
      if (current.metadata.deletionTimestamp) return clone(current);
      const marked = clone(current);
      marked.metadata.deletionTimestamp = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      marked.metadata.deletionGracePeriodSeconds = 0;
      return this.write(collection, key, marked, 'MODIFIED');
    }
    return this.remove(collection, key, current);
  }

  /** Watch events after `resourceVersion`, then live ones; 410 when that version is no longer retained. */
  subscribe(fromVersion: number, listener: (event: WatchEvent) => void): () => void {
    if (fromVersion < this.compactedThrough)
      throw new ApiError(410, 'Expired', `too old resource version: ${fromVersion} (${this.compactedThrough})`);
    for (const event of this.history) if (event.resourceVersion > fromVersion) listener(event);
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Test hook: forget the event history, as an etcd compaction does. */
  compact(): void {
    this.history = [];
    this.compactedThrough = this.revision;
  }

  private write(collection: string, key: string, object: KubeObject, type: 'ADDED' | 'MODIFIED'): KubeObject {
    const previous = this.objects.get(key)?.object;
    this.revision += 1;
    object.metadata.resourceVersion = String(this.revision);
    this.objects.set(key, { collection, object });
    this.emit({
      type,
      object: clone(object),
      ...(previous ? { previous: clone(previous) } : {}),
      resourceVersion: this.revision,
      collection,
    });
    return clone(object);
  }

  private remove(collection: string, key: string, object: KubeObject): KubeObject {
    this.objects.delete(key);
    this.revision += 1;
    const removed = clone(object);
    removed.metadata.resourceVersion = String(this.revision);
    this.emit({ type: 'DELETED', object: removed, resourceVersion: this.revision, collection });
    this.collectDependents(object.metadata.uid!);
    return clone(removed);
  }

  /** Background garbage collection: dependents whose owner is gone are deleted (honouring their finalizers). */
  private collectDependents(ownerUid: string): void {
    for (const [, entry] of [...this.objects]) {
      if (entry.object.metadata.ownerReferences?.some((reference) => reference.uid === ownerUid)) {
        this.delete(entry.collection, entry.object.metadata.namespace, entry.object.metadata.name);
      }
    }
  }

  private emit(event: WatchEvent): void {
    this.history.push(event);
    if (this.history.length > HISTORY_LIMIT) {
      const dropped = this.history.shift()!;
      this.compactedThrough = dropped.resourceVersion;
    }
    for (const listener of this.listeners) listener(event);
  }
}

/** JSON with keys sorted at every level, to compare objects as values. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, node: unknown) =>
    node !== null && typeof node === 'object' && !Array.isArray(node)
      ? Object.fromEntries(Object.entries(node).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : node,
  );
}

function specOf(object: KubeObject): unknown {
  const { metadata: _metadata, status: _status, ...rest } = object;
  return rest;
}
