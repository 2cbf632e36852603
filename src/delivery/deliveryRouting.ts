import type { AttemptTarget } from '../webhooks/endpointSecretsStore.ts';
import type { LaneLimits } from './endpointLanes.ts';

/**
 * What a delivery message a worker loaded needs, decided without I/O (the worker, deliveryWorker.ts, reads
 * the delivery's row and carries the answer out):
 *
 * - `stray`: its delivery is not in our database and the message does not name this deployment as its
 *   publisher: perhaps another deployment's on a shared NATS, left for it (strayMessages.ts);
 * - `settle`: nothing to do: deleted with its endpoint, already finished, not yet published (a stale copy), or
 *   for an attempt already made;
 * - `cancel`: its endpoint was disabled: the delivery is cancelled, no request made;
 * - `defer`: the worker is stopping: nothing of it will finish to release a parked delivery, so it goes back
 *   with a due time;
 * - `admit`: to its endpoint's lane, for an attempt.
 */
export type DeliveryRoute<W> = { readonly kind: 'stray' | 'settle' } | { readonly kind: 'cancel' | 'defer' | 'admit'; readonly work: W };

/** What the worker knows of a delivery's row, when there is one. */
export interface RoutedDelivery {
  readonly state: string;
  readonly published: boolean;
  readonly attempts: number;
  readonly endpoint: { readonly active: boolean };
}

export function routeDelivery<W extends RoutedDelivery>(
  message: { readonly attempt: number; readonly provablyOurs: boolean },
  work: W | undefined,
  stopping: boolean,
): DeliveryRoute<W> {
  if (!work) return { kind: message.provablyOurs ? 'settle' : 'stray' };
  if (work.state !== 'pending' || !work.published || work.attempts !== message.attempt - 1) return { kind: 'settle' };
  if (!work.endpoint.active) return { kind: 'cancel', work };
  return { kind: stopping ? 'defer' : 'admit', work };
}

/** An endpoint's own limits on its lane: one request at a time when ordered, its rate limit; none for most. */
export function laneLimitsOf(endpoint: Pick<AttemptTarget, 'ordered' | 'rateLimitPerS'>): LaneLimits | undefined {
  if (!endpoint.ordered && endpoint.rateLimitPerS === null) return undefined;
  return { concurrency: endpoint.ordered ? 1 : Number.POSITIVE_INFINITY, ratePerS: endpoint.rateLimitPerS ?? undefined };
}
