import { jetstream, jetstreamManager, type Consumer, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { BusConnection } from '../bus/natsConnection.ts';
import { deliveryConsumerDefinition, ensureConsumer, type BusNames } from '../bus/streams.ts';
import type { Queryable } from '../db/database.ts';
import { loadDeliveryWork, type DeliveryWork } from './deliveryOutbox.ts';
import { attemptVerdict, deliveryPolicy, type AttemptVerdict, type DeliveryOutcome, type DeliveryPolicy } from './deliveryStateMachine.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { SigningKeys, deliveryRequest } from './deliveryRequest.ts';
import type { SealedSecrets } from '../webhooks/secretBox.ts';
import type { SecretBox } from '../webhooks/secretBox.ts';
import { decodeDeliveryMessage, MAX_DELIVERIES_PER_MESSAGE, publisherOf, type DeliveryMessage } from './deliveryMessage.ts';
import { EndpointLanes } from './endpointLanes.ts';
import { OutcomeRecorder } from './outcomeRecorder.ts';
import { RotatedSecrets } from './rotatedSecrets.ts';
import type { RetryPolicy } from './retryPolicy.ts';
import { StrayMessages } from './strayMessages.ts';
import type { SendResult, WebhookSender } from './webhookSender.ts';

export interface DeliveryWorkerOptions {
  readonly bus: BusConnection;
  readonly names: BusNames;
  /** Replicas of the AUDIT_DELIVERIES stream (NATS_STREAM_REPLICAS); 1 by default. */
  readonly streamReplicas?: number;
  /** What to send is read here. */
  readonly db: Queryable;
  /** For the LISTEN connection that hears of secret rotations (rotatedSecrets.ts). */
  readonly databaseUrl: string;
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
 * Backpressure: while this many deliveries are held for endpoints that are keeping up (loading, queued, in
 * flight or being recorded), the worker stops pulling; JetStream keeps the rest for other workers. Slow
 * endpoints do not count: their overflow is parked, so hung receivers never stop the worker from
 * pulling work for healthy ones.
 */
const MAX_HELD_FOR_FAST_ENDPOINTS = 2_000;
/**
 * How long one pull waits for messages when there are none. Short, so that a pull lost with its server (a
 * NATS restart) is replaced within seconds; an idle worker sends one pull request this often.
 */
const PULL_EXPIRES_MS = 5_000;
const PULL_RETRY_MS = 1_000;
/** A delivery that arrives while the worker stops comes back after about this long, to another worker. */
const STOPPING_DEFER_MS = 5_000;
/** A delivery this worker cannot prepare (its endpoint's secret does not open) comes back after about this long. */
const UNPREPARABLE_DEFER_MS = 60_000;
const LOAD_BATCH = 256;
const LOAD_LINGER_MS = 2;
const FLUSH_FAILURE_REDELIVERY_MS = 5_000;
/** A saturated endpoint's parking is logged at most this often (per endpoint and worker). */
const PARKING_LOG_INTERVAL_MS = 60_000;

/**
 * A JetStream message (one stream sequence) and how many of its deliveries are still being worked on. A
 * copy of the message that JetStream redelivers while we hold it is folded into its ticket, never given
 * one of its own (see receive).
 */
interface Ticket {
  /** The latest copy received: acknowledgements and keep-alives go to it. */
  message: JsMsg;
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

/** A loaded delivery waiting for (or holding) a slot of its endpoint's lane. */
interface Routed {
  readonly held: Held;
  readonly work: DeliveryWork;
  /** When its secrets were read, in RotatedSecrets' generations. */
  readonly secretsGeneration: number;
}

/**
 * A delivery worker: one member of the durable pull consumer. Messages are loaded from Postgres in
 * batches, sent with bounded concurrency per endpoint (a hung receiver holds at most its own slots; its
 * overflow is parked in Postgres, never blocking the consumer, and comes back as requests to it finish:
 * see outcomeRecorder.ts), and every outcome is written, in batches,
 * before its message is acknowledged, so a worker killed at any point loses nothing: the message comes
 * back and the attempt is made again (at least once).
 */
export class DeliveryWorker {
  private readonly options: DeliveryWorkerOptions;
  private pull: ConsumerMessages | undefined;
  private running: Promise<void> | undefined;
  private readonly held = new Map<string, Held>();
  /** By stream sequence. */
  private readonly tickets = new Map<number, Ticket>();
  private readonly lanes: EndpointLanes<Routed>;
  private readonly recorder: OutcomeRecorder<Held>;
  private readonly policy: DeliveryPolicy;
  private readonly signingKeys: SigningKeys;
  private readonly rotatedSecrets: RotatedSecrets;
  private readonly strays: StrayMessages;
  private loadBuffer: Held[] = [];
  private loadTimer: NodeJS.Timeout | undefined;
  private readonly loading = new Set<Promise<void>>();
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  private resumePulling: (() => void) | undefined;
  private resumeTimer: NodeJS.Timeout | undefined;
  /** Per saturated endpoint: deliveries parked since its parking was last logged, and when that was. */
  private readonly parkingLog = new Map<string, { parked: number; loggedAt: number }>();

  constructor(options: DeliveryWorkerOptions) {
    this.options = options;
    this.strays = new StrayMessages(options.log, options.metrics);
    this.signingKeys = new SigningKeys(options.secrets);
    this.rotatedSecrets = new RotatedSecrets({ db: options.db, databaseUrl: options.databaseUrl, log: options.log });
    this.lanes = new EndpointLanes<Routed>({
      concurrency: options.endpointConcurrency,
      send: (_, routed) =>
        this.attempt(routed).catch((thrown: unknown) => {
          this.attemptImpossible(routed.held, routed.work, thrown);
          return false;
        }),
      onSlotFreed: () => this.maybeResumePulling(),
    });
    this.policy = deliveryPolicy(options.retryPolicy);
    this.recorder = new OutcomeRecorder<Held>({
      writer: options.writer,
      policy: this.policy,
      log: options.log,
      metrics: options.metrics,
      onWritten: (batch, committed) => {
        for (const held of batch) this.settle(held, committed ? undefined : FLUSH_FAILURE_REDELIVERY_MS);
        this.maybeResumePulling();
      },
    });
  }

  async start(): Promise<void> {
    const definition = deliveryConsumerDefinition(this.options.names, this.options.ackWaitMs, this.options.streamReplicas);
    await ensureConsumer(await jetstreamManager(this.options.bus.nc), definition);
    await this.rotatedSecrets.start();
    const consumer = await jetstream(this.options.bus.nc).consumers.get(definition.stream.name, definition.consumer.durable_name);
    // Held messages (queued, in flight, or waiting for their outcome to commit) must not be redelivered
    // to another worker meanwhile: tell JetStream we are still working on them.
    this.keepAliveTimer = setInterval(
      () => {
        for (const ticket of this.tickets.values()) ticket.message.working();
      },
      Math.max(500, Math.floor(this.options.ackWaitMs / 3)),
    ).unref();
    // A lane turning slow (a receiver that stopped answering) gives back its excess queue and frees the
    // backpressure without any request finishing, so both are checked on a timer too.
    this.resumeTimer = setInterval(() => {
      for (const { endpointId, item } of this.lanes.trimSlowLanes()) this.park(item.held, endpointId);
      this.maybeResumePulling();
      this.forgetQuietParking();
    }, 250).unref();
    this.running = this.pullLoop(consumer);
  }

  /** Stops pulling, finishes requests in flight, writes their outcomes; queued messages go back unacked. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.resumePulling?.();
    await this.pull?.close().catch(() => undefined);
    await this.running;
    clearTimeout(this.loadTimer);
    for (const { held } of this.lanes.takeWaiting()) this.settle(held, 0);
    for (const held of this.loadBuffer.splice(0)) this.settle(held, 0);
    await Promise.allSettled([...this.loading]);
    await this.lanes.idle();
    await this.recorder.flushAll();
    clearInterval(this.keepAliveTimer);
    clearInterval(this.resumeTimer);
    await this.rotatedSecrets.stop();
  }

  /**
   * Pulls only as many messages as backpressure lets the worker hold, and takes each into a ticket (kept
   * alive) at once. With consume(), a batch already pulled waited in the client's buffer, unacknowledged and
   * without keep-alive, for as long as backpressure paused the worker: after the ack wait JetStream sent
   * those messages again, to this worker or another one, while their first copies were still to be read.
   */
  private async pullLoop(consumer: Consumer): Promise<void> {
    while (!this.stopping) {
      const room = MAX_HELD_FOR_FAST_ENDPOINTS - this.heldForFastEndpoints();
      if (room < MAX_HELD_FOR_FAST_ENDPOINTS / 2) {
        await new Promise<void>((resolve) => (this.resumePulling = resolve));
        continue;
      }
      try {
        // Messages carry up to MAX_DELIVERIES_PER_MESSAGE deliveries.
        const pull = await consumer.fetch({ max_messages: Math.ceil(room / MAX_DELIVERIES_PER_MESSAGE), expires: PULL_EXPIRES_MS });
        this.pull = pull;
        if (this.stopping) await pull.close();
        for await (const message of pull) this.receive(message);
      } catch (thrown) {
        if (this.stopping) break;
        this.options.log.warn({ err: coerceError(thrown) }, 'pulling delivery messages failed; pulling again');
        await new Promise((resolve) => setTimeout(resolve, PULL_RETRY_MS));
      }
    }
  }

  private receive(message: JsMsg): void {
    const publisher = publisherOf(message.headers);
    if (publisher !== undefined && publisher !== this.options.names.deploymentId) {
      this.strays.leave(message, publisher);
      return;
    }
    // A copy of a message we hold: JetStream sent it again because our keep-alive did not reach it in time
    // (a NATS restart restores the consumer's older state and redelivers at once). The ticket we hold settles
    // it. Settling the copy on its own would acknowledge the stream message, deleting it from the work
    // queue, while deliveries of the first copy were still queued: had one of them then failed to be
    // recorded (its message negatively acknowledged for redelivery), or the worker died, nothing would
    // have been left to redeliver, and the delivery would have waited for the relay's sweep.
    const holding = this.tickets.get(message.info.streamSequence);
    if (holding) {
      holding.message = message;
      return;
    }
    const deliveries = decodeDeliveryMessage(message.data);
    if (!deliveries) {
      this.options.log.warn({ stream_seq: message.info.streamSequence }, 'undecodable delivery message dropped');
      message.term();
      return;
    }
    const ticket: Ticket = { message, unsettled: 0, redeliverAfterMs: undefined, provablyOurs: publisher !== undefined, stray: false };
    for (const delivery of deliveries) {
      // Already held for another message (the relay published it again): that message, unacknowledged
      // until its own deliveries settle, stands for this one too.
      const key = heldKey(delivery);
      if (this.held.has(key)) continue;
      const held = { ticket, ...delivery };
      ticket.unsettled += 1;
      this.held.set(key, held);
      this.loadBuffer.push(held);
    }
    if (ticket.unsettled === 0) {
      message.ack();
      return;
    }
    this.tickets.set(message.info.streamSequence, ticket);
    if (this.loadBuffer.length >= LOAD_BATCH) this.loadBatch();
    else this.loadTimer ??= setTimeout(() => this.loadBatch(), LOAD_LINGER_MS);
  }

  /** Held messages of endpoints that have shown they keep up; others cannot stop the worker from pulling. */
  private heldForFastEndpoints(): number {
    return this.held.size - this.lanes.heldByUnprovenEndpoints();
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
    const secretsGeneration = this.rotatedSecrets.generation();
    const task = loadDeliveryWork(this.options.db, [...new Set(batch.map((held) => held.deliveryId))])
      .then((work) => {
        for (const held of batch) this.route(held, work.get(held.deliveryId), secretsGeneration);
      })
      .catch((thrown: unknown) => {
        this.options.log.warn({ err: coerceError(thrown), messages: batch.length }, 'could not load deliveries; they will be redelivered');
        for (const held of batch) this.settle(held, FLUSH_FAILURE_REDELIVERY_MS);
      });
    this.loading.add(task);
    void task.finally(() => this.loading.delete(task));
  }

  /** Decides what a loaded message needs: nothing (stale), cancellation, an attempt, or deferral. */
  private route(held: Held, work: DeliveryWork | undefined, secretsGeneration: number): void {
    // Not in our database: deleted with its endpoint if the message is ours, else perhaps another deployment's.
    if (!work && !held.ticket.provablyOurs) {
      held.ticket.stray = true;
      this.settle(held);
      return;
    }
    // Deleted with its endpoint, already finished, or a message for an attempt already made.
    if (work?.state !== 'pending' || !work.published || work.attempts !== held.attempt - 1) {
      this.settle(held);
      return;
    }
    if (!work.endpoint.active) {
      this.record(held, work.endpoint.id, { kind: 'cancelled', deliveryId: held.deliveryId, attempt: held.attempt });
      return;
    }
    // Stopping: nothing of this worker's will finish to release a parked delivery, so it gets a due time.
    if (this.stopping) this.defer(held, work.endpoint.id, STOPPING_DEFER_MS);
    else if (this.lanes.admit(work.endpoint.id, { held, work, secretsGeneration }) === 'overflow') this.park(held, work.endpoint.id);
  }

  /**
   * Every slot of the endpoint is busy and its queue is full: the delivery waits in Postgres, parked, until
   * requests to the endpoint finish (each releases one; outcomeRecorder.ts). Its requests in flight here
   * are recorded after this (the recorder keeps order), so at least one release follows every parking; no
   * attempt is counted. A deferral to a due time instead made a hung endpoint's whole backlog come back
   * through the relay, JetStream and this worker every few seconds.
   */
  private park(held: Held, endpointId: string): void {
    this.options.metrics.webhookParked.inc();
    this.record(held, endpointId, { kind: 'parked', deliveryId: held.deliveryId, attempt: held.attempt });
    const now = Date.now();
    const parking = this.parkingLog.get(endpointId);
    if (parking && now - parking.loggedAt < PARKING_LOG_INTERVAL_MS) {
      parking.parked += 1;
      return;
    }
    this.options.log.warn(
      { endpoint_id: endpointId, parked: (parking?.parked ?? 0) + 1, concurrency: this.options.endpointConcurrency },
      'webhook endpoint saturated (every request slot busy): its further deliveries are parked until requests to it finish',
    );
    this.parkingLog.set(endpointId, { parked: 0, loggedAt: now });
  }

  /** Endpoints whose parking was last logged long ago start afresh: the next parking is logged at once. */
  private forgetQuietParking(): void {
    const now = Date.now();
    for (const [endpointId, parking] of this.parkingLog) {
      if (now - parking.loggedAt >= 2 * PARKING_LOG_INTERVAL_MS) this.parkingLog.delete(endpointId);
    }
  }

  /** Puts a delivery back in Postgres, due again after about `aboutMs`; no attempt is counted. */
  private defer(held: Held, endpointId: string, aboutMs: number): void {
    this.options.metrics.webhookDeferred.inc();
    const dueAt = new Date(Date.now() + aboutMs * (0.5 + Math.random()));
    this.record(held, endpointId, { kind: 'deferred', deliveryId: held.deliveryId, attempt: held.attempt, dueAt });
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
      { err: coerceError(thrown), endpoint_id: work.endpoint.id, delivery_id: held.deliveryId },
      'could not prepare a delivery (is SECRET_ENCRYPTION_KEY the key its endpoint secret was sealed with?); it will be tried again later',
    );
    this.defer(held, work.endpoint.id, UNPREPARABLE_DEFER_MS);
  }

  /** Makes the attempt and records its outcome; resolves with whether the receiver answered (any status). */
  private async attempt({ held, work, secretsGeneration }: Routed): Promise<boolean> {
    // Signed with the secrets valid now: a previous secret whose overlap ended, or that a second rotation
    // retired, while the delivery waited in its lane does not sign.
    const loaded = { secrets: work.endpoint.secrets, generation: secretsGeneration };
    let sealed: SealedSecrets | undefined;
    try {
      sealed = await this.rotatedSecrets.signing(work.endpoint.id, loaded);
    } catch (thrown) {
      this.options.log.warn(
        { err: coerceError(thrown), endpoint_id: work.endpoint.id },
        'could not read a rotated endpoint secret; the delivery will be tried again',
      );
      this.defer(held, work.endpoint.id, FLUSH_FAILURE_REDELIVERY_MS);
      return false;
    }
    // Deleted with its endpoint meanwhile: nothing to send, nothing to record.
    if (!sealed) {
      this.settle(held);
      return false;
    }
    const now = Date.now();
    const keys = this.signingKeys.at(work.endpoint.id, sealed, now);
    const request = deliveryRequest(work.event, held.attempt, keys, now);
    const attemptedAt = new Date();
    const result = await this.options.sender.send(work.endpoint.id, work.endpoint.url, request.body, request.headers);
    const outcome: DeliveryOutcome = {
      kind: 'attempted',
      deliveryId: held.deliveryId,
      attempt: held.attempt,
      ok: result.ok,
      jitter: this.options.retryPolicy.draw(),
      record: {
        attemptedAt,
        durationMs: result.durationMs,
        statusCode: result.statusCode,
        error: result.error,
        responseExcerpt: result.responseExcerpt,
      },
    };
    // What the recorder's state machine will make of it, for the metrics and the log now.
    const verdict = attemptVerdict(outcome, this.policy);
    this.options.metrics.webhookAttempts.inc({
      result: verdict.result === 'succeeded' ? 'success' : verdict.result === 'failed' ? 'failed' : 'retry',
    });
    this.options.metrics.webhookAttemptDuration.observe(result.durationMs / 1000);
    this.logAttempt(held, work, result, verdict);
    this.record(held, work.endpoint.id, outcome);
    return result.statusCode !== null;
  }

  /**
   * Ids, attempt and what came back, so an operator can follow one delivery; never the URL (its query may
   * carry a token), the body, the signature or the receiver's answer. A success is logged at debug level,
   * so its line is not even assembled at the usual levels: that is thousands of objects a second.
   */
  private logAttempt(held: Held, work: DeliveryWork, result: SendResult, verdict: AttemptVerdict): void {
    const { log } = this.options;
    if (result.ok && !log.isLevelEnabled('debug')) return;
    const logged = {
      tenant_id: work.event.tenantId,
      endpoint_id: work.endpoint.id,
      event_id: work.event.eventId,
      delivery_id: held.deliveryId,
      attempt: held.attempt,
      status_code: result.statusCode,
      error: result.error,
      duration_ms: result.durationMs,
      next_attempt_in_ms: verdict.retryInMs ?? null,
    };
    if (result.ok) log.debug(logged, 'webhook delivered');
    else if (verdict.result === 'failed') log.warn(logged, 'webhook delivery failed on its last attempt');
    else log.warn(logged, 'webhook delivery attempt failed; it will be retried');
  }

  private record(held: Held, endpointId: string, outcome: DeliveryOutcome): void {
    this.recorder.add({ settles: held, endpointId, outcome });
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
    this.tickets.delete(ticket.message.info.streamSequence);
    if (ticket.stray) this.strays.leave(ticket.message, undefined);
    else if (ticket.redeliverAfterMs === undefined) ticket.message.ack();
    else ticket.message.nak(ticket.redeliverAfterMs);
  }
}

function heldKey(delivery: DeliveryMessage): string {
  return `${delivery.deliveryId}.${delivery.attempt}`;
}
