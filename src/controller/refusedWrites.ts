import type { Logger } from '../platform/logger.ts';
import type { RefusedWrite, WriteObserver } from './kubeClients.ts';

/** Objects whose refusals are remembered: a bound, not a limit. */
const REMEMBERED_OBJECTS = 4096;

/**
 * Says at error level which object the API server refused to have written and why, once: the same object
 * refused again for the same reason (a Lease renewed every two seconds, a status rewritten at every resync)
 * is not logged again until a write to it is accepted. A refusal is never the ordinary course of things (a
 * 400 or 422 means the controller sends what a cluster does not accept, a 403 that its RBAC lacks a verb), so
 * it must not hide among retries at warn level; and a message repeated every two seconds would hide
 * everything else. The Status's message names the field and the value refused; it carries no Secret data
 * (the API server validates a Secret's keys and size, never echoes its values).
 */
export class RefusedWrites implements WriteObserver {
  private readonly log: Logger;
  /** Per object (its path, and for a create its name): the refusals already logged (method, code, reason). */
  private readonly reported = new Map<string, Set<string>>();

  constructor(log: Logger) {
    this.log = log;
  }

  refused(write: RefusedWrite): void {
    const object = write.name ? `${write.path} (${write.name})` : write.path;
    // Not the message: it quotes the values sent, a renewTime among them, new at every try.
    const refusal = `${write.method} ${write.code} ${write.reason}`;
    const known = this.reported.get(object) ?? new Set<string>();
    if (known.has(refusal)) return;
    known.add(refusal);
    this.reported.delete(object);
    this.reported.set(object, known);
    if (this.reported.size > REMEMBERED_OBJECTS) this.reported.delete(this.reported.keys().next().value!);
    this.log.error(
      { object, method: write.method, code: write.code, reason: write.reason },
      `the Kubernetes API refused to write ${object} (${write.code} ${write.reason}): ${write.message}`,
    );
  }

  accepted(_method: string, path: string): void {
    if (this.reported.size === 0) return;
    for (const object of this.reported.keys()) if (object === path || object.startsWith(`${path} (`)) this.reported.delete(object);
  }
}
