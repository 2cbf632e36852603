import type pg from 'pg';
import type { Actor } from '../events/adminEvent.ts';
import type { NewEvent } from '../events/eventStore.ts';
import { readDeliveryFacts, recordOutcomes, unparkDeliveries, type OutcomeWrite } from './outcomeStore.ts';
import { applyOutcome, type DeliveryFacts, type DeliveryOutcome, type DeliveryPolicy, type EndpointFacts } from './deliveryStateMachine.ts';
import { cancelPendingDeliveries } from './endpointDeliveries.ts';
import { recordOperationalEvent } from './operationalFanOut.ts';
import { startNextQueued } from './orderedDeliveries.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { isTransientServerCondition } from '../db/sqlstate.ts';
import { ServiceUnavailableError, coerceError } from '../platform/errors.ts';
import { MicroBatcher } from '../platform/microBatcher.ts';
import { backoffDelay, type BackoffPolicy } from '../platform/backoff.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import { sleep } from '../platform/sleep.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { endpointNotice } from '../webhooks/operationalEvents.ts';
import { webhookEvent } from '../webhooks/webhookEvents.ts';
import { lockEndpoints, saveEndpointCounts } from '../webhooks/endpointDeliveryStore.ts';
import { disableEndpoint, findEndpoint } from '../webhooks/webhookStore.ts';
import { deliveryMetrics } from './deliveryMetrics.ts';

const FLUSH_BATCH = 1_000;
const MAX_FLUSH_BATCH = 2_000;
// Outcomes are written after the request, so the linger adds nothing to delivery latency; it makes
// fewer, larger transactions (and acks come that much later). 50 ms against 20: batches of about 550
// rather than 220 at the delivery benchmark's rate, 4 µs less worker CPU and 3 µs less Postgres CPU per
// delivery (BENCHMARKS.md). An ordered endpoint's next delivery waits for the write: its outcomes go at once.
const FLUSH_LINGER_MS = 50;

// Writing again a batch Postgres could not take: quickly at first (a connection refused for a moment),
// then every few seconds while it stays away. One worker's writes are serialised, so there is nothing to
// spread apart.
const RECORD_RETRY: BackoffPolicy = { initialMs: 100, maxMs: 2_000, spread: [1, 1] };
const STOP_RETRY_MS = 5_000;

const SYSTEM_ACTOR: Actor = { userId: 'audit-trail', userRole: 'system' };

/** An outcome waiting to be written, with what it settles once committed (or fails to be). */
export interface PendingOutcome<S> {
  readonly settles: S;
  readonly endpointId: string;
  readonly outcome: DeliveryOutcome;
  /** Written without the linger: an ordered endpoint's next delivery starts only once this is recorded. */
  readonly awaited?: boolean;
}

export interface OutcomeRecorderOptions<S> {
  readonly writer: EventWriter;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  /** The retry schedule and the auto-disable threshold the state machine applies. */
  readonly policy: DeliveryPolicy;
  /** Called with a batch's outcomes once it committed (`committed`), or failed to (they must come back). */
  readonly onWritten: (settles: S[], committed: boolean) => void;
  readonly clock?: Clock;
}

/**
 * Writes a worker's outcomes in batches, one transaction each: the attempt records and delivery states
 * (the outbox), the endpoints' failure counts, the release of parked deliveries as requests finish, the
 * start of an ordered endpoint's next delivery, the notice of an endpoint that turned failing, and the
 * auto-disable of an endpoint whose count reached the threshold, with its admin.webhook.auto_disable event
 * and its endpoint.disabled notice.
 * What changes is decided by the state machine (deliveryStateMachine.ts); this only reads what it needs and
 * persists what it returns. Messages are acknowledged only after the commit.
 */
export class OutcomeRecorder<S> {
  private readonly options: OutcomeRecorderOptions<S>;
  private readonly batcher: MicroBatcher<PendingOutcome<S>>;
  private readonly clock: Clock;
  /** Until when a batch Postgres cannot take is written again rather than handed back (Infinity while running). */
  private retryUntil = Number.POSITIVE_INFINITY;
  private wake: (() => void) | undefined;

  constructor(options: OutcomeRecorderOptions<S>) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    // Writes are serialised; under load the batches grow instead of queueing up as many small transactions.
    this.batcher = new MicroBatcher({
      size: FLUSH_BATCH,
      maxBatch: MAX_FLUSH_BATCH,
      lingerMs: FLUSH_LINGER_MS,
      write: (batch) => this.write(batch),
      // write() settles its batch either way; this is for a bug in the settling itself.
      onError: (error, batch) => this.options.log.error({ err: error, outcomes: batch.length }, 'settling recorded outcomes failed'),
    });
  }

  add(outcome: PendingOutcome<S>): void {
    this.batcher.add(outcome, outcome.awaited === true);
  }

  /** Writes every outcome still waiting (when stopping). */
  async flushAll(): Promise<void> {
    // A stopping worker waits this long for Postgres, then lets its messages be redelivered.
    this.retryUntil = Math.min(this.retryUntil, this.clock.now() + STOP_RETRY_MS);
    this.wake?.();
    await this.batcher.drain();
  }

  /**
   * A batch Postgres cannot take now (down, refusing connections, in recovery) is written again, with
   * backoff, for as long as it takes: its requests were sent, and handing their messages back would have
   * them sent again when the message returns, perhaps again and again while Postgres comes and goes (issue
   * 28: up to 4 copies at max_connections=10). Held, the messages are kept from redelivery by the worker's
   * keep-alive, so a delivery whose outcome cannot be recorded is not sent again until it is; only a worker
   * that stops or dies meanwhile leaves it to be sent once more. Any other failure hands the batch back.
   */
  private async write(batch: Array<PendingOutcome<S>>): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.options.writer.recordWith('internal', (client) => this.apply(client, batch));
        if (attempt > 1)
          this.options.log.info({ outcomes: batch.length, attempts: attempt }, 'delivery outcomes recorded after Postgres came back');
        this.options.onWritten(
          batch.map((pending) => pending.settles),
          true,
        );
        return;
      } catch (thrown) {
        const error = coerceError(thrown);
        this.options.metrics.errors.inc({ kind: 'delivery_record_failed' });
        if (!(await this.retries(error, batch.length, attempt))) {
          this.options.log.warn(
            { err: error, outcomes: batch.length },
            'could not record delivery outcomes; the messages will be redelivered',
          );
          this.options.onWritten(
            batch.map((pending) => pending.settles),
            false,
          );
          return;
        }
      }
    }
  }

  /** Whether a failed write is tried again: after a backoff, only for Postgres' passing conditions. */
  private async retries(error: Error, outcomes: number, attempt: number): Promise<boolean> {
    // Only what the database layer says is Postgres' passing condition: a plain Error from the batch's own
    // code may look like a lost connection, and retrying a batch that fails for good would hold its
    // messages (and the consumer's ack floor) forever.
    const passing = error instanceof ServiceUnavailableError || isTransientServerCondition(error);
    if (!passing || this.clock.now() >= this.retryUntil) return false;
    const retryInMs = backoffDelay(RECORD_RETRY, attempt);
    if (attempt === 1 || attempt % 10 === 0)
      this.options.log.warn(
        { err: error, outcomes, attempt, retry_in_ms: retryInMs },
        'could not record delivery outcomes (Postgres unavailable); holding them, and their messages, until it can',
      );
    // A stopping worker wakes the wait (flushAll): the write is tried once more at once.
    const woken = new AbortController();
    this.wake = () => woken.abort();
    await sleep(retryInMs, { clock: this.clock, signal: woken.signal }).catch(() => undefined);
    this.wake = undefined;
    return true;
  }

  /**
   * One batch, in one transaction: reads what the state machine needs under the endpoints' locks, folds the
   * outcomes through it in delivery order, and persists what it decided.
   */
  private async apply(client: pg.PoolClient, batch: Array<PendingOutcome<S>>): Promise<{ result: undefined; events: NewEvent[] }> {
    // One lock order everywhere (endpoints by id, then deliveries by id) keeps concurrent workers and API
    // calls from deadlocking.
    const endpoints = await lockEndpoints(
      client,
      batch.map((pending) => pending.endpointId),
    );
    const sorted = [...batch].sort((a, b) => compareIds(a.outcome.deliveryId, b.outcome.deliveryId));
    const deliveries = await readDeliveryFacts(client, [...new Set(sorted.map(({ outcome }) => outcome.deliveryId))]);
    const decided = decide(sorted, deliveries, endpoints, this.options.policy);
    await recordOutcomes(client, decided.writes);
    // In this transaction: a finished request's release is never lost, nor made twice.
    const unparked = await unparkDeliveries(client, [...decided.releases.keys()], [...decided.releases.values()]);
    if (unparked > 0) deliveryMetrics(this.options.metrics).unparked.inc({ by: 'request' }, unparked);
    await saveEndpointCounts(client, decided.endpoints);
    // After the deliveries' states: an ordered endpoint whose delivery just finished is idle now.
    await startNextQueued(client, decided.startNext);
    for (const endpointId of decided.failing) {
      const endpoint = (await findEndpoint(client, endpointId))!;
      await recordOperationalEvent(
        client,
        endpointNotice('endpoint.failing', endpoint, { auto_disable_after: this.options.policy.autoDisableAfter }),
      );
    }
    const events = [];
    for (const endpointId of decided.disable) {
      const disabled = await disableEndpoint(client, endpointId, 'auto');
      await cancelPendingDeliveries(client, endpointId);
      deliveryMetrics(this.options.metrics).autoDisabled.inc();
      this.options.log.warn(
        { endpoint_id: endpointId, tenant_id: disabled.tenantId },
        'webhook endpoint disabled after consecutive failed deliveries',
      );
      await recordOperationalEvent(client, endpointNotice('endpoint.disabled', disabled, { reason: 'auto' }));
      events.push(
        webhookEvent('admin.webhook.auto_disable', disabled, SYSTEM_ACTOR, {
          reason: `${decided.endpoints.get(endpointId)!.consecutiveFailures} consecutive failed deliveries`,
        }),
      );
    }
    return { result: undefined, events };
  }
}

/** What a batch comes to: the state machine applied to each outcome in turn, each seeing the ones before. */
interface Decided {
  readonly writes: OutcomeWrite[];
  /** Parked deliveries to release, per endpoint. */
  readonly releases: Map<string, number>;
  /** The counts of the endpoints the batch changed. */
  readonly endpoints: Map<string, EndpointFacts>;
  /** Endpoints to disable, in id order. */
  readonly disable: string[];
  /** Endpoints to report failing, in id order. */
  readonly failing: string[];
  /** Ordered endpoints whose delivery finished: their next one starts. */
  readonly startNext: string[];
}

function decide(
  sorted: ReadonlyArray<PendingOutcome<unknown>>,
  deliveries: Map<string, DeliveryFacts>,
  locked: ReadonlyMap<string, EndpointFacts>,
  policy: DeliveryPolicy,
): Decided {
  const endpoints = new Map(locked);
  const decided: Decided = { writes: [], releases: new Map(), endpoints: new Map(), disable: [], failing: [], startNext: [] };
  const disable = new Map<string, boolean>();
  const failing = new Set<string>();
  const startNext = new Set<string>();
  for (const { endpointId, outcome } of sorted) {
    const delivery = deliveries.get(outcome.deliveryId);
    const transition = applyOutcome(delivery, endpoints.get(endpointId), outcome, policy);
    const record = transition.recordAttempt && outcome.kind === 'attempted' ? outcome.record : undefined;
    if (record || transition.delivery) {
      decided.writes.push({ deliveryId: outcome.deliveryId, attempt: outcome.attempt, record, change: transition.delivery });
    }
    // A second copy of the same outcome in the batch finds the delivery moved on, as it would in the next one.
    if (delivery && transition.delivery) {
      const { state, attempts } = transition.delivery;
      deliveries.set(outcome.deliveryId, { state, attempts, failureCounted: delivery.failureCounted });
    }
    if (transition.releasesParked > 0) {
      decided.releases.set(endpointId, (decided.releases.get(endpointId) ?? 0) + transition.releasesParked);
    }
    if (transition.endpoint) {
      endpoints.set(endpointId, transition.endpoint);
      decided.endpoints.set(endpointId, transition.endpoint);
      disable.set(endpointId, transition.disable);
    }
    if (transition.failing) failing.add(endpointId);
    if (transition.startsNext) startNext.add(endpointId);
  }
  for (const [endpointId, yes] of [...disable.entries()].sort(([a], [b]) => compareText(a, b))) {
    if (yes) decided.disable.push(endpointId);
  }
  decided.failing.push(...[...failing].sort(compareText));
  decided.startNext.push(...[...startNext].sort(compareText));
  return decided;
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Bigint ids as text, in numeric order. */
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}
