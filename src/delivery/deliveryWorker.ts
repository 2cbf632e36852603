import { createSecretKey, type KeyObject } from 'node:crypto';
import { jetstream, jetstreamManager, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { Actor } from '../events/adminEvent.ts';
import type { BusConnection } from '../bus/natsConnection.ts';
import { deliveryConsumerDefinition, ensureConsumer, type BusNames } from '../bus/streams.ts';
import type { Queryable } from '../db/database.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { SERVICE_VERSION } from '../platform/version.ts';
import { buildEnvelope } from '../webhooks/envelope.ts';
import type { SecretBox } from '../webhooks/secretBox.ts';
import { signDelivery } from '../webhooks/signature.ts';
import { webhookEvent } from '../webhooks/webhookRegistry.ts';
import { applyEndpointTallies, disableEndpoint, lockEndpoints, type EndpointTally } from '../webhooks/webhookStore.ts';
import { loadDeliveryWork, recordOutcomes, type DeliveryOutcome, type DeliveryWork } from '../events/deliveryOutbox.ts';
import { decodeDeliveryMessage, MAX_DELIVERIES_PER_MESSAGE, publisherOf, type DeliveryMessage } from './deliveryMessage.ts';
import { AUTO_DISABLE_AFTER_FAILED_DELIVERIES, type RetryPolicy } from './retryPolicy.ts';
import { StrayMessages } from './strayMessages.ts';
import type { WebhookSender } from './webhookSender.ts';

export interface DeliveryWorkerOptions {
  readonly bus: BusConnection;
  readonly names: BusNames;
  /** Replicas of the AUDIT_DELIVERIES stream (NATS_STREAM_REPLICAS); 1 by default. */
  readonly streamReplicas?: number;
  /** What to send is read here. */
  readonly db: Queryable;
  /** Attempt records and admin.webhook.auto_disable events go through the one write path. */
  readonly writer: EventWriter;
  readonly secrets: SecretBox;
  readonly sender: WebhookSender;
  readonly retryPolicy: RetryPolicy;
  readonly ackWaitMs: number;
  /** Requests in flight to one endpoint from this worker. */
  readonly endpointConcurrency: number;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
}

/**
 * Messages a slow endpoint may have waiting in this worker beyond its concurrency before the rest are
 * deferred to Postgres. An endpoint is slow when all its slots are busy and none finished for a while; a
 * fast endpoint's queue drains as it fills and may grow to the hard cap.
 */
const SLOW_ENDPOINT_QUEUE_PER_SLOT = 4;
const ENDPOINT_QUEUE_HARD_CAP = 5_000;
const SLOW_AFTER_MS = 1_000;
/**
 * Backpressure: while this many messages are held for endpoints that are keeping up (loading, queued, in
 * flight or being recorded), the worker stops pulling; JetStream keeps the rest for other workers. Slow
 * endpoints do not count: their overflow is deferred, so hung receivers never stop the worker from
 * pulling work for healthy ones.
 */
const MAX_HELD_FOR_FAST_ENDPOINTS = 2_000;
/**
 * A deferred delivery comes back after about as long as its endpoint has been stuck, within these bounds
 * (no attempt is counted): a receiver that hangs for minutes would otherwise have its whole backlog
 * cycle through the relay, JetStream and this worker every few seconds, taking capacity from healthy ones.
 */
const MIN_DEFER_MS = 5_000;
const MAX_DEFER_MS = 60_000;
const LOAD_BATCH = 256;
const LOAD_LINGER_MS = 2;
const FLUSH_BATCH = 500;
const MAX_FLUSH_BATCH = 2_000;
// Outcomes are written after the request, so the linger adds nothing to delivery latency; it makes
// fewer, larger transactions (and acks come that much later).
const FLUSH_LINGER_MS = 20;
const FLUSH_FAILURE_REDELIVERY_MS = 5_000;

const SYSTEM_ACTOR: Actor = { userId: 'audit-trail', userRole: 'system' };

/** A JetStream message and how many of its deliveries are still being worked on. */
interface Ticket {
  readonly message: JsMsg;
  unsettled: number;
  /** Set when a delivery of the message must be tried again: once all are settled, the message is
   * negatively acknowledged with this delay and comes back whole (entries already recorded are skipped). */
  redeliverAfterMs: number | undefined;
  /** The message names this deployment as its publisher; false for messages of earlier versions. */
  readonly provablyOurs: boolean;
  /** A delivery of the message is not in our database and the message is not provably ours: leave it. */
  stray: boolean;
}

/** One delivery of a message, from receipt until its outcome is committed (or it is given back). */
interface Held {
  readonly ticket: Ticket;
  readonly deliveryId: string;
  readonly attempt: number;
}

/** An outcome waiting to be written, with the message delivery it settles. */
interface HeldOutcome {
  readonly held: Held;
  readonly endpointId: string;
  readonly outcome: DeliveryOutcome;
}

interface EndpointLane {
  inFlight: number;
  /** Last time a request to the endpoint finished (or the lane opened). */
  lastFinishedAt: number;
  /** Requests finished so far: a lane with none has not shown it keeps up. */
  finished: number;
  readonly waiting: Array<{ held: Held; work: DeliveryWork }>;
}

/**
 * A delivery worker: one member of the durable pull consumer. Messages are loaded from Postgres in
 * batches, sent with bounded concurrency per endpoint (a hung receiver holds at most its own slots; its
 * overflow goes back to Postgres, never blocking the consumer), and every outcome is written, in batches,
 * before its message is acknowledged, so a worker killed at any point loses nothing: the message comes
 * back and the attempt is made again (at least once).
 */
export class DeliveryWorker {
  private readonly options: DeliveryWorkerOptions;
  private messages: ConsumerMessages | undefined;
  private running: Promise<void> | undefined;
  private readonly held = new Map<string, Held>();
  private readonly tickets = new Set<Ticket>();
  private readonly lanes = new Map<string, EndpointLane>();
  private readonly signingKeys = new Map<string, { sealed: Buffer; key: KeyObject }>();
  private readonly strays: StrayMessages;
  private loadBuffer: Held[] = [];
  private loadTimer: NodeJS.Timeout | undefined;
  private outcomes: HeldOutcome[] = [];
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private flushQueued = false;
  private readonly sending = new Set<Promise<void>>();
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  private resumePulling: (() => void) | undefined;
  private resumeTimer: NodeJS.Timeout | undefined;

  constructor(options: DeliveryWorkerOptions) {
    this.options = options;
    this.strays = new StrayMessages(options.log, options.metrics);
  }

  async start(): Promise<void> {
    const definition = deliveryConsumerDefinition(this.options.names, this.options.ackWaitMs, this.options.streamReplicas);
    await ensureConsumer(await jetstreamManager(this.options.bus.nc), definition);
    const consumer = await jetstream(this.options.bus.nc).consumers.get(definition.stream.name, definition.consumer.durable_name);
    // Messages carry up to MAX_DELIVERIES_PER_MESSAGE deliveries: buffer about what backpressure lets us hold.
    this.messages = await consumer.consume({ max_messages: Math.ceil(MAX_HELD_FOR_FAST_ENDPOINTS / MAX_DELIVERIES_PER_MESSAGE) });
    // Held messages (queued, in flight, or waiting for their outcome to commit) must not be redelivered
    // to another worker meanwhile: tell JetStream we are still working on them.
    this.keepAliveTimer = setInterval(() => {
      for (const ticket of this.tickets) ticket.message.working();
    }, Math.max(500, Math.floor(this.options.ackWaitMs / 3))).unref();
    // A lane turning slow (a receiver that stopped answering) gives back its excess queue and frees the
    // backpressure without any request finishing, so both are checked on a timer too.
    this.resumeTimer = setInterval(() => {
      this.trimSlowLanes();
      this.maybeResumePulling();
    }, 250).unref();
    this.running = this.consumeLoop(this.messages);
  }

  /** Stops pulling, finishes requests in flight, writes their outcomes; queued messages go back unacked. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.messages?.close().catch(() => undefined);
    this.resumePulling?.();
    await this.running;
    clearTimeout(this.loadTimer);
    for (const lane of this.lanes.values()) {
      for (const { held } of lane.waiting.splice(0)) this.settle(held, 0);
    }
    for (const held of this.loadBuffer.splice(0)) this.settle(held, 0);
    await Promise.allSettled([...this.sending]);
    await this.flushAll();
    clearInterval(this.keepAliveTimer);
    clearInterval(this.resumeTimer);
  }

  private async consumeLoop(messages: ConsumerMessages): Promise<void> {
    for await (const message of messages) {
      const publisher = publisherOf(message.headers);
      if (publisher !== undefined && publisher !== this.options.names.deploymentId) {
        this.strays.leave(message, publisher);
        continue;
      }
      const deliveries = decodeDeliveryMessage(message.data);
      if (!deliveries) {
        this.options.log.warn({ stream_seq: message.info.streamSequence }, 'undecodable delivery message dropped');
        message.term();
        continue;
      }
      const ticket: Ticket = { message, unsettled: 0, redeliverAfterMs: undefined, provablyOurs: publisher !== undefined, stray: false };
      for (const delivery of deliveries) {
        // A redelivery of a message we still hold (our keep-alive came late): the copy we hold settles it.
        const key = heldKey(delivery);
        if (this.held.has(key)) continue;
        const held = { ticket, ...delivery };
        ticket.unsettled += 1;
        this.held.set(key, held);
        this.loadBuffer.push(held);
      }
      if (ticket.unsettled === 0) continue;
      this.tickets.add(ticket);
      if (this.loadBuffer.length >= LOAD_BATCH) this.loadBatch();
      else this.loadTimer ??= setTimeout(() => this.loadBatch(), LOAD_LINGER_MS);
      if (this.heldForFastEndpoints() >= MAX_HELD_FOR_FAST_ENDPOINTS) {
        await new Promise<void>((resolve) => (this.resumePulling = resolve));
      }
    }
  }

  /** Held messages of endpoints that have shown they keep up; others cannot stop the worker from pulling. */
  private heldForFastEndpoints(): number {
    let heldByOthers = 0;
    for (const lane of this.lanes.values()) {
      if (lane.finished === 0 || this.isSlow(lane)) heldByOthers += lane.waiting.length + lane.inFlight;
    }
    return this.held.size - heldByOthers;
  }

  /** A lane that turned slow keeps only its slow-lane queue; the rest goes back to Postgres for later. */
  private trimSlowLanes(): void {
    for (const [endpointId, lane] of this.lanes) {
      const cap = this.queueCapOf(lane);
      if (lane.waiting.length <= cap) continue;
      for (const { held } of lane.waiting.splice(cap)) this.defer(held, endpointId, lane);
    }
  }

  /** Puts a delivery back in Postgres, due again once its endpoint may have recovered; no attempt is counted. */
  private defer(held: Held, endpointId: string, lane: EndpointLane): void {
    this.deferFor(held, endpointId, Math.min(MAX_DEFER_MS, Math.max(MIN_DEFER_MS, Date.now() - lane.lastFinishedAt)));
  }

  private deferFor(held: Held, endpointId: string, aboutMs: number): void {
    this.options.metrics.webhookDeferred.inc();
    const dueAt = new Date(Date.now() + aboutMs * (0.5 + Math.random()));
    this.addOutcome({ held, endpointId, outcome: { kind: 'deferred', deliveryId: held.deliveryId, attempt: held.attempt, dueAt } });
  }

  /**
   * The worker itself could not make the attempt: the endpoint's secret does not open with this process's
   * SECRET_ENCRYPTION_KEY (a key rotated without re-encrypting, a pod with the wrong key), or a bug. Such a
   * failure comes before the request, so no attempt counts against the endpoint; the delivery comes back
   * later, perhaps to a worker that can make it. Never a crash: the same message would take down every
   * worker in turn.
   */
  private attemptImpossible(held: Held, work: DeliveryWork, thrown: unknown): void {
    this.options.metrics.errors.inc({ kind: 'delivery_not_attempted' });
    this.options.log.error(
      { err: coerceError(thrown), endpoint_id: work.endpointId, delivery_id: held.deliveryId },
      'could not prepare a delivery (is SECRET_ENCRYPTION_KEY the key its endpoint secret was sealed with?); it will be tried again later',
    );
    this.deferFor(held, work.endpointId, MAX_DEFER_MS);
  }

  private maybeResumePulling(): void {
    if (!this.resumePulling || this.heldForFastEndpoints() >= MAX_HELD_FOR_FAST_ENDPOINTS / 2) return;
    const resume = this.resumePulling;
    this.resumePulling = undefined;
    resume();
  }

  private loadBatch(): void {
    clearTimeout(this.loadTimer);
    this.loadTimer = undefined;
    const batch = this.loadBuffer;
    this.loadBuffer = [];
    if (batch.length === 0) return;
    const task = loadDeliveryWork(this.options.db, [...new Set(batch.map((held) => held.deliveryId))])
      .then((work) => {
        for (const held of batch) this.route(held, work.get(held.deliveryId));
      })
      .catch((thrown: unknown) => {
        this.options.log.warn({ err: coerceError(thrown), messages: batch.length }, 'could not load deliveries; they will be redelivered');
        for (const held of batch) this.settle(held, FLUSH_FAILURE_REDELIVERY_MS);
      });
    this.track(task);
  }

  /** Decides what a loaded message needs: nothing (stale), cancellation, an attempt, or deferral. */
  private route(held: Held, work: DeliveryWork | undefined): void {
    // Not in our database: deleted with its endpoint if the message is ours, else perhaps another deployment's.
    if (!work && !held.ticket.provablyOurs) {
      held.ticket.stray = true;
      this.settle(held);
      return;
    }
    // Deleted with its endpoint, already finished, or a message for an attempt already made.
    if (!work || work.state !== 'pending' || !work.published || work.attempts !== held.attempt - 1) {
      this.settle(held);
      return;
    }
    if (!work.endpointActive) {
      this.addOutcome({ held, endpointId: work.endpointId, outcome: { kind: 'cancelled', deliveryId: held.deliveryId, attempt: held.attempt } });
      return;
    }
    const lane = this.laneOf(work.endpointId);
    if (lane.inFlight < this.options.endpointConcurrency && !this.stopping) {
      this.dispatch(lane, held, work);
    } else if (lane.waiting.length < this.queueCapOf(lane) && !this.stopping) {
      lane.waiting.push({ held, work });
    } else {
      this.defer(held, work.endpointId, lane);
    }
  }

  private isSlow(lane: EndpointLane): boolean {
    return lane.inFlight >= this.options.endpointConcurrency && Date.now() - lane.lastFinishedAt > SLOW_AFTER_MS;
  }

  private queueCapOf(lane: EndpointLane): number {
    return this.isSlow(lane) ? this.options.endpointConcurrency * SLOW_ENDPOINT_QUEUE_PER_SLOT : ENDPOINT_QUEUE_HARD_CAP;
  }

  private dispatch(lane: EndpointLane, held: Held, work: DeliveryWork): void {
    lane.inFlight += 1;
    const task = this.attempt(held, work).catch((thrown: unknown) => this.attemptImpossible(held, work, thrown)).finally(() => {
      lane.inFlight -= 1;
      lane.finished += 1;
      lane.lastFinishedAt = Date.now();
      const next = lane.waiting.shift();
      if (next) this.dispatch(lane, next.held, next.work);
      else if (lane.inFlight === 0) this.lanes.delete(work.endpointId);
      this.maybeResumePulling();
    });
    this.track(task);
  }

  private async attempt(held: Held, work: DeliveryWork): Promise<void> {
    const body = buildEnvelope(work.event);
    const attemptedAt = new Date();
    const result = await this.options.sender.send(work.endpointId, work.url, body, {
      'content-type': 'application/json',
      'user-agent': `audit-trail-webhooks/${SERVICE_VERSION}`,
      'x-service-signature': signDelivery(this.signingKeyOf(work), body),
      'x-service-event-id': work.event.eventId,
      'x-service-delivery-attempt': String(held.attempt),
    });
    const retryDelay = result.ok ? undefined : this.options.retryPolicy.delayAfter(held.attempt);
    const state = result.ok ? 'succeeded' : retryDelay === undefined ? 'failed' : 'pending';
    this.options.metrics.webhookAttempts.inc({ result: state === 'succeeded' ? 'success' : state === 'failed' ? 'failed' : 'retry' });
    this.options.metrics.webhookAttemptDuration.observe(result.durationMs / 1000);
    // Ids, attempt and what came back, so an operator can follow one delivery; never the URL (its query
    // may carry a token), the body, the signature or the receiver's answer.
    const logged = {
      tenant_id: work.event.tenantId,
      endpoint_id: work.endpointId,
      event_id: work.event.eventId,
      delivery_id: held.deliveryId,
      attempt: held.attempt,
      status_code: result.statusCode,
      error: result.error,
      duration_ms: result.durationMs,
      next_attempt_in_ms: retryDelay ?? null,
    };
    if (result.ok) this.options.log.debug(logged, 'webhook delivered');
    else if (state === 'failed') this.options.log.warn(logged, 'webhook delivery failed on its last attempt');
    else this.options.log.warn(logged, 'webhook delivery attempt failed; it will be retried');
    this.addOutcome({
      held,
      endpointId: work.endpointId,
      outcome: {
        kind: 'attempted',
        deliveryId: held.deliveryId,
        attempt: held.attempt,
        state,
        dueAt: retryDelay === undefined ? null : new Date(Date.now() + retryDelay),
        record: { attemptedAt, durationMs: result.durationMs, statusCode: result.statusCode, error: result.error, responseExcerpt: result.responseExcerpt },
      },
    });
  }

  /** The endpoint's signing key, decrypted and imported once per secret (createHmac imports a text key per call). */
  private signingKeyOf(work: DeliveryWork): KeyObject {
    const cached = this.signingKeys.get(work.endpointId);
    if (cached && cached.sealed.equals(work.secretCiphertext)) return cached.key;
    const key = createSecretKey(Buffer.from(this.options.secrets.open(work.secretCiphertext), 'utf8'));
    this.signingKeys.set(work.endpointId, { sealed: work.secretCiphertext, key });
    return key;
  }

  private addOutcome(outcome: HeldOutcome): void {
    this.outcomes.push(outcome);
    if (this.outcomes.length >= FLUSH_BATCH) void this.flush();
    else this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_LINGER_MS);
  }

  /**
   * Outcome writes are serialised, one transaction per batch; messages are acked after the commit. A batch
   * is taken when its write starts, not when it was asked for, and what arrives during a write waits for
   * its own trigger (a full batch or the linger): under load the batches grow instead of queueing up as
   * many small transactions.
   */
  private flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.flushQueued) return this.flushing;
    this.flushQueued = true;
    this.flushing = this.flushing.then(async () => {
      this.flushQueued = false;
      const batch = this.outcomes.splice(0, MAX_FLUSH_BATCH);
      if (batch.length > 0) await this.writeOutcomes(batch);
      if (this.outcomes.length >= FLUSH_BATCH) void this.flush();
      else if (this.outcomes.length > 0) this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_LINGER_MS);
    });
    return this.flushing;
  }

  /** Writes every outcome still waiting (when stopping). */
  private async flushAll(): Promise<void> {
    while (this.outcomes.length > 0 || this.flushQueued) await this.flush();
  }

  private async writeOutcomes(batch: HeldOutcome[]): Promise<void> {
    try {
      await this.options.writer.recordWith('internal', async (client) => {
        // One lock order everywhere (endpoints by id, then deliveries by id) keeps concurrent workers and
        // API calls from deadlocking.
        await lockEndpoints(client, batch.map((outcome) => outcome.endpointId));
        const sorted = [...batch].sort((a, b) => compareIds(a.held.deliveryId, b.held.deliveryId));
        const changed = await recordOutcomes(client, sorted.map(({ outcome }) => outcome));
        const tallies = tallyEndpoints(sorted.filter((outcome) => changed.has(outcome.held.deliveryId)));
        const endpoints = await applyEndpointTallies(client, tallies);
        const events = [];
        for (const endpoint of endpoints) {
          if (!endpoint.active || endpoint.consecutiveFailures < AUTO_DISABLE_AFTER_FAILED_DELIVERIES) continue;
          const disabled = await disableEndpoint(client, endpoint.id, 'auto');
          this.options.metrics.webhookAutoDisabled.inc();
          this.options.log.warn({ endpoint_id: endpoint.id, tenant_id: disabled.tenantId }, 'webhook endpoint disabled after consecutive failed deliveries');
          events.push(webhookEvent('admin.webhook.auto_disable', disabled, SYSTEM_ACTOR, { reason: `${endpoint.consecutiveFailures} consecutive failed deliveries` }));
        }
        return { result: undefined, events };
      });
      for (const { held } of batch) this.settle(held);
      this.maybeResumePulling();
    } catch (thrown) {
      this.options.log.warn({ err: coerceError(thrown), outcomes: batch.length }, 'could not record delivery outcomes; the messages will be redelivered');
      this.options.metrics.errors.inc({ kind: 'delivery_record_failed' });
      for (const { held } of batch) this.settle(held, FLUSH_FAILURE_REDELIVERY_MS);
    }
  }

  /**
   * Done with one delivery of a message: its outcome is committed, or it was stale, or (with
   * `redeliverAfterMs`) it must be tried again. The message is acknowledged with its last delivery, unless
   * it is a stray, left for its owner.
   */
  private settle(held: Held, redeliverAfterMs?: number): void {
    this.held.delete(heldKey(held));
    const ticket = held.ticket;
    if (redeliverAfterMs !== undefined) ticket.redeliverAfterMs = Math.max(ticket.redeliverAfterMs ?? 0, redeliverAfterMs);
    ticket.unsettled -= 1;
    if (ticket.unsettled > 0) return;
    this.tickets.delete(ticket);
    if (ticket.stray) this.strays.leave(ticket.message, undefined);
    else if (ticket.redeliverAfterMs === undefined) ticket.message.ack();
    else ticket.message.nak(ticket.redeliverAfterMs);
  }

  private laneOf(endpointId: string): EndpointLane {
    let lane = this.lanes.get(endpointId);
    if (!lane) {
      lane = { inFlight: 0, lastFinishedAt: Date.now(), finished: 0, waiting: [] };
      this.lanes.set(endpointId, lane);
    }
    return lane;
  }

  private track(task: Promise<void>): void {
    this.sending.add(task);
    void task.finally(() => this.sending.delete(task));
  }
}

/**
 * Folds a batch's attempts into one counter update per endpoint, in delivery order: a success resets
 * `consecutive_failures`, each delivery that went terminal adds one; every attempt moves last_delivery_at.
 */
export function tallyEndpoints(outcomes: readonly HeldOutcome[]): EndpointTally[] {
  const tallies = new Map<string, { reset: boolean; failures: number; last: Date }>();
  for (const { outcome, endpointId } of outcomes) {
    if (outcome.kind !== 'attempted') continue;
    const { attemptedAt } = outcome.record;
    const tally = tallies.get(endpointId) ?? { reset: false, failures: 0, last: attemptedAt };
    if (outcome.state === 'succeeded') {
      tally.reset = true;
      tally.failures = 0;
    } else if (outcome.state === 'failed') {
      tally.failures += 1;
    }
    if (attemptedAt > tally.last) tally.last = attemptedAt;
    tallies.set(endpointId, tally);
  }
  return [...tallies.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([endpointId, tally]) => ({ endpointId, reset: tally.reset, failuresAfterLastSuccess: tally.failures, lastAttemptAt: tally.last }));
}

function heldKey(delivery: DeliveryMessage): string {
  return `${delivery.deliveryId}.${delivery.attempt}`;
}

function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}
