import type { DeliveryOutcome } from './deliveryOutbox.ts';
import type { EndpointTally, TalliedEndpoint } from '../webhooks/webhookStore.ts';

/**
 * How delivery outcomes count against an endpoint (docs/webhooks.md "Success, retries and auto-disable"):
 * a delivery fails when it goes terminal; `consecutive_failures` counts failed deliveries in a row across
 * events and restarts at any success; at AUTO_DISABLE_AFTER_FAILED_DELIVERIES the endpoint is disabled.
 */
export const AUTO_DISABLE_AFTER_FAILED_DELIVERIES = 10;

/**
 * Folds a batch's outcomes into one counter update per endpoint, in the order given: a success resets the
 * count, each delivery that went terminal adds one, every attempt moves last_delivery_at. Endpoints in id
 * order, the lock order of the store. `alreadyCounted` names deliveries whose failure was counted before
 * (a manual retry of a failed delivery): failing again, they count as an attempt only.
 */
export function tallyEndpointOutcomes(
  outcomes: ReadonlyArray<{ readonly endpointId: string; readonly outcome: DeliveryOutcome }>,
  alreadyCounted: ReadonlySet<string> = new Set(),
): EndpointTally[] {
  const tallies = new Map<string, { reset: boolean; failures: number; last: Date }>();
  for (const { outcome, endpointId } of outcomes) {
    if (outcome.kind !== 'attempted') continue;
    const { attemptedAt } = outcome.record;
    const tally = tallies.get(endpointId) ?? { reset: false, failures: 0, last: attemptedAt };
    if (outcome.state === 'succeeded') {
      tally.reset = true;
      tally.failures = 0;
    } else if (outcome.state === 'failed' && !alreadyCounted.has(outcome.deliveryId)) {
      tally.failures += 1;
    }
    if (attemptedAt > tally.last) tally.last = attemptedAt;
    tallies.set(endpointId, tally);
  }
  return [...tallies.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([endpointId, tally]) => ({
      endpointId,
      reset: tally.reset,
      failuresAfterLastSuccess: tally.failures,
      lastAttemptAt: tally.last,
    }));
}

/** An endpoint still active whose failed deliveries in a row reached the threshold. */
export function shouldAutoDisable(endpoint: TalliedEndpoint): boolean {
  return endpoint.active && endpoint.consecutiveFailures >= AUTO_DISABLE_AFTER_FAILED_DELIVERIES;
}
