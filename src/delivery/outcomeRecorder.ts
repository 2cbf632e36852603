import type { Actor } from '../events/adminEvent.ts';
import { recordOutcomes, unparkDeliveries, type DeliveryOutcome } from './deliveryOutbox.ts';
import { cancelPendingDeliveries } from './endpointDeliveries.ts';
import { failuresAlreadyCounted } from './deliveryRetry.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { shouldAutoDisable, tallyEndpointOutcomes } from './endpointFailures.ts';
import { webhookEvent } from '../webhooks/webhookRegistry.ts';
import { applyEndpointTallies, disableEndpoint, lockEndpoints } from '../webhooks/webhookStore.ts';

const FLUSH_BATCH = 500;
const MAX_FLUSH_BATCH = 2_000;
// Outcomes are written after the request, so the linger adds nothing to delivery latency; it makes
// fewer, larger transactions (and acks come that much later).
const FLUSH_LINGER_MS = 20;

const SYSTEM_ACTOR: Actor = { userId: 'audit-trail', userRole: 'system' };

/** An outcome waiting to be written, with what it settles once committed (or fails to be). */
export interface PendingOutcome<S> {
  readonly settles: S;
  readonly endpointId: string;
  readonly outcome: DeliveryOutcome;
}

export interface OutcomeRecorderOptions<S> {
  readonly writer: EventWriter;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  /** Called with a batch's outcomes once it committed (`committed`), or failed to (they must come back). */
  readonly onWritten: (settles: S[], committed: boolean) => void;
}

/**
 * Writes a worker's outcomes in batches, one transaction each: the attempt records and delivery states
 * (the outbox), the endpoints' failure counts, and the auto-disable of an endpoint whose count reached the
 * threshold, with its admin.webhook.auto_disable event. Messages are acknowledged only after the commit.
 */
export class OutcomeRecorder<S> {
  private readonly options: OutcomeRecorderOptions<S>;
  private outcomes: Array<PendingOutcome<S>> = [];
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private flushQueued = false;

  constructor(options: OutcomeRecorderOptions<S>) {
    this.options = options;
  }

  add(outcome: PendingOutcome<S>): void {
    this.outcomes.push(outcome);
    if (this.outcomes.length >= FLUSH_BATCH) void this.flush();
    else this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_LINGER_MS);
  }

  /** Writes every outcome still waiting (when stopping). */
  async flushAll(): Promise<void> {
    while (this.outcomes.length > 0 || this.flushQueued) await this.flush();
  }

  /**
   * Writes are serialised. A batch is taken when its write starts, not when it was asked for, and what
   * arrives during a write waits for its own trigger (a full batch or the linger): under load the batches
   * grow instead of queueing up as many small transactions.
   */
  private flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.flushQueued) return this.flushing;
    this.flushQueued = true;
    this.flushing = this.flushing.then(async () => {
      this.flushQueued = false;
      const batch = this.outcomes.splice(0, MAX_FLUSH_BATCH);
      if (batch.length > 0) await this.write(batch);
      if (this.outcomes.length >= FLUSH_BATCH) void this.flush();
      else if (this.outcomes.length > 0) this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_LINGER_MS);
    });
    return this.flushing;
  }

  private async write(batch: Array<PendingOutcome<S>>): Promise<void> {
    try {
      await this.options.writer
        .recordWith('internal', async (client) => {
          // One lock order everywhere (endpoints by id, then deliveries by id) keeps concurrent workers and
          // API calls from deadlocking.
          await lockEndpoints(
            client,
            batch.map((pending) => pending.endpointId),
          );
          const sorted = [...batch].sort((a, b) => compareIds(a.outcome.deliveryId, b.outcome.deliveryId));
          const changed = await recordOutcomes(
            client,
            sorted.map(({ outcome }) => outcome),
          );
          const applied = sorted.filter(({ outcome }) => changed.has(outcome.deliveryId));
          // In this transaction: a finished request's release is never lost, nor made twice.
          const releases = parkedReleases(applied);
          const unparked = await unparkDeliveries(client, [...releases.keys()], [...releases.values()]);
          // Only failures can have been counted before (deliveryRetry.ts); most batches have none.
          const failed = applied.filter(({ outcome }) => outcome.kind === 'attempted' && outcome.state === 'failed');
          const counted = await failuresAlreadyCounted(
            client,
            failed.map(({ outcome }) => outcome.deliveryId),
          );
          const endpoints = await applyEndpointTallies(client, tallyEndpointOutcomes(applied, counted));
          const events = [];
          for (const endpoint of endpoints.filter(shouldAutoDisable)) {
            const disabled = await disableEndpoint(client, endpoint.id, 'auto');
            await cancelPendingDeliveries(client, endpoint.id);
            this.options.metrics.webhookAutoDisabled.inc();
            this.options.log.warn(
              { endpoint_id: endpoint.id, tenant_id: disabled.tenantId },
              'webhook endpoint disabled after consecutive failed deliveries',
            );
            events.push(
              webhookEvent('admin.webhook.auto_disable', disabled, SYSTEM_ACTOR, {
                reason: `${endpoint.consecutiveFailures} consecutive failed deliveries`,
              }),
            );
          }
          return { result: unparked, events };
        })
        .then((unparked) => {
          if (unparked > 0) this.options.metrics.webhookUnparked.inc({ by: 'request' }, unparked);
        });
      this.options.onWritten(
        batch.map((pending) => pending.settles),
        true,
      );
    } catch (thrown) {
      this.options.log.warn(
        { err: coerceError(thrown), outcomes: batch.length },
        'could not record delivery outcomes; the messages will be redelivered',
      );
      this.options.metrics.errors.inc({ kind: 'delivery_record_failed' });
      this.options.onWritten(
        batch.map((pending) => pending.settles),
        false,
      );
    }
  }
}

/**
 * How many parked deliveries each endpoint's finished requests release: one per request, so that an
 * endpoint that stays saturated gets exactly as much work as it finishes (its attempts go on at the pace
 * of its slots, and nothing cycles through the relay meanwhile); two per success, so that a receiver that
 * recovered has its backlog released at a pace that doubles with every round of answers.
 */
function parkedReleases(recorded: ReadonlyArray<PendingOutcome<unknown>>): Map<string, number> {
  const releases = new Map<string, number>();
  for (const { endpointId, outcome } of recorded) {
    if (outcome.kind !== 'attempted') continue;
    releases.set(endpointId, (releases.get(endpointId) ?? 0) + (outcome.state === 'succeeded' ? 2 : 1));
  }
  return releases;
}

/** Bigint ids as text, in numeric order. */
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}
