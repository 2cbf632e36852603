import { PatchStrategy, setHeaderOptions, type CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../platform/logger.ts';
import { kubeTime } from './kubeTime.ts';
import { systemClock } from '../platform/clock.ts';

export interface InvolvedObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
}

export interface EventRecorderOptions {
  readonly component: string;
  /** Events one object may start with before the rate applies (client-go: 25). */
  readonly burst?: number;
  /** One more event per object this often once the burst is spent (client-go: every 5 minutes). */
  readonly refillMs?: number;
  readonly now?: () => number;
}

/** How many distinct events are remembered for aggregation (client-go's LRU size). */
const REMEMBERED_EVENTS = 4096;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface Recorded {
  readonly name: string;
  readonly namespace: string;
  count: number;
}

/**
 * Kubernetes Events for what a person running `kubectl describe` should see (a key minted, revoked, a spec
 * refused), aggregated as client-go's recorder does: an event identical to one recorded before (same
 * object, type, reason and message) increments that Event's count and lastTimestamp instead of creating
 * another object, and each object may record a burst of events, then one per refill period (the rest are
 * dropped). Best effort: an Event that cannot be written is logged, never fails a reconcile. Messages never
 * contain a key or a secret.
 */
export class EventRecorder {
  private readonly core: CoreV1Api;
  private readonly log: Logger;
  private readonly component: string;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly now: () => number;
  private readonly recorded = new Map<string, Recorded>();
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(core: CoreV1Api, log: Logger, options: EventRecorderOptions) {
    this.core = core;
    this.log = log;
    this.component = options.component;
    this.burst = options.burst ?? 25;
    this.refillMs = options.refillMs ?? 300_000;
    this.now = options.now ?? (() => systemClock.now());
  }

  async record(object: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    if (!this.takeToken(`${object.uid}\u0000${type}\u0000${reason}`)) return;
    const key = [object.uid, object.kind, object.namespace, object.name, type, reason, message].join('\u0000');
    const now = kubeTime(this.now());
    try {
      const previous = this.recorded.get(key);
      if (previous && (await this.increment(previous, now))) {
        this.remember(key, previous);
        return;
      }
      const created = await this.core.createNamespacedEvent({
        namespace: object.namespace,
        body: {
          metadata: { generateName: `${object.name}.`, namespace: object.namespace },
          involvedObject: { ...object },
          reason,
          message,
          type,
          source: { component: this.component },
          reportingComponent: this.component,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
      this.remember(key, { name: created.metadata!.name!, namespace: object.namespace, count: 1 });
    } catch (error) {
      this.log.warn({ err: error, reason }, 'could not record a Kubernetes event');
    }
  }

  /** false when the Event is gone (expired after the API server's event TTL): a new one is created. */
  private async increment(recorded: Recorded, now: Date): Promise<boolean> {
    try {
      await this.core.patchNamespacedEvent(
        { name: recorded.name, namespace: recorded.namespace, body: { count: recorded.count + 1, lastTimestamp: now } },
        mergePatch,
      );
      recorded.count += 1;
      return true;
    } catch (error) {
      if ((error as { code?: number }).code === 404) return false;
      throw error;
    }
  }

  private remember(key: string, recorded: Recorded): void {
    this.recorded.delete(key);
    this.recorded.set(key, recorded);
    if (this.recorded.size > REMEMBERED_EVENTS) this.recorded.delete(this.recorded.keys().next().value!);
  }

  /** A token bucket per object and reason, as client-go's spam filter. */
  private takeToken(key: string): boolean {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    const refilled = Math.min(this.burst, bucket.tokens + (now - bucket.at) / this.refillMs);
    this.buckets.delete(key);
    if (this.buckets.size >= REMEMBERED_EVENTS) this.buckets.delete(this.buckets.keys().next().value!);
    if (refilled < 1) {
      this.buckets.set(key, { tokens: refilled, at: now });
      return false;
    }
    this.buckets.set(key, { tokens: refilled - 1, at: now });
    return true;
  }
}
