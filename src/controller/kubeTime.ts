import { V1MicroTime } from '@kubernetes/client-node';

/**
 * The two timestamp types of the Kubernetes API, as the API server (Go, k8s.io/apimachinery's metav1) reads
 * them. Every timestamp the controller sends to the API server is made here:
 * - MicroTime (a Lease's acquireTime and renewTime, an Event's eventTime): parsed with the layout
 *   2006-01-02T15:04:05.000000Z07:00, so exactly six fractional digits; three (what Date#toISOString and
 *   hence the client library write for a plain Date) is refused with 400, and no Lease is ever taken.
 * - Time (an Event's firstTimestamp and lastTimestamp, a condition's lastTransitionTime): RFC 3339, written in
 *   whole seconds as metav1 itself writes it.
 * The client library serialises a Date through toISOString (toJSON calls it too), so each is a Date whose
 * toISOString is the wire form: the types the generated models ask for stay intact.
 * test/controller/wire-formats.test.ts parses what the controller sent with Go's own layouts.
 */

/** metav1.MicroTime: UTC, microseconds (a JavaScript clock has milliseconds, so the last three are 0). */
class MicroTime extends V1MicroTime {
  override toISOString(): string {
    return `${super.toISOString().slice(0, 23)}000Z`;
  }
}

/** metav1.Time: RFC 3339 in whole seconds, UTC. */
class Time extends Date {
  override toISOString(): string {
    return `${super.toISOString().slice(0, 19)}Z`;
  }
}

export function microTime(at: number): V1MicroTime {
  return new MicroTime(at);
}

export function kubeTime(at: number): Date {
  return new Time(at);
}

/** A metav1.Time as the text a status field or condition holds. */
export function kubeTimeText(at: number): string {
  return kubeTime(at).toISOString();
}
