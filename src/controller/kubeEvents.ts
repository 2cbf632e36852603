import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../platform/logger.ts';

export interface InvolvedObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
}

/**
 * Kubernetes Events for what a person running `kubectl describe` should see (a key minted, revoked, a spec
 * refused). Best effort: an Event that cannot be written is logged, never fails a reconcile. Messages
 * never contain a key or a secret.
 */
export class EventRecorder {
  private readonly core: CoreV1Api;
  private readonly log: Logger;

  constructor(core: CoreV1Api, log: Logger) {
    this.core = core;
    this.log = log;
  }

  async record(object: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const now = new Date();
    await this.core
      .createNamespacedEvent({
        namespace: object.namespace,
        body: {
          metadata: { generateName: `${object.name}.`, namespace: object.namespace },
          involvedObject: { ...object },
          reason,
          message,
          type,
          source: { component: 'audit-trail-controller' },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      })
      .catch((error: Error) => this.log.warn({ err: error, reason }, 'could not record a Kubernetes event'));
  }
}
