import { jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import type { Redis } from 'ioredis';
import type { BusConnection } from '../bus/natsConnection.ts';
import { deliveryConsumerDefinition, ensureConsumer, type BusNames } from '../bus/jetStreamDefinitions.ts';
import type { Queryable } from '../db/database.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { spread } from '../platform/backoff.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { MicroBatcher } from '../platform/microBatcher.ts';
import type { SecretBox } from '../webhooks/secretBox.ts';
import { DeliveryAttempts } from './deliveryAttempts.ts';
import { decodeDeliveryMessage, publisherOf } from './deliveryMessage.ts';
import { DeliveryPuller } from './deliveryPuller.ts';
import { loadDeliveryWork, type DeliveryWork } from './deliveryWork.ts';
import { deliveryPolicy, type DeliveryOutcome } from './deliveryStateMachine.ts';
import { EndpointLanes } from './endpointLanes.ts';
import { laneLimitsOf, routeDelivery } from './deliveryRouting.ts';
import { EndpointRateLimit } from './endpointRateLimit.ts';
import { HeldMessages, type Held } from './heldMessages.ts';
import { OutcomeRecorder } from './outcomeRecorder.ts';
import { ParkingLog } from './parkingLog.ts';
import type { RetryPolicy } from './retryPolicy.ts';
import { RotatedSecrets } from './rotatedSecrets.ts';
import { StrayMessages } from './strayMessages.ts';
import type { WebhookSender } from './webhookSender.ts';
import { deliveryMetrics, registerWebhookRequestsInFlight } from './deliveryMetrics.ts';

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
  /** Requests (each on a socket of its own) in flight from this worker over all endpoints, shared fairly. */
  readonly maxSockets: number;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  /** Where endpoints' rate limits are shared with the other workers (endpointRateLimit.ts); each keeps its own without it. */
  readonly redis?: Redis;
  /** Time for due times, rate limits and the parking log; the system's by default. */
  readonly clock?: Clock;
}

/** A delivery that arrives while the worker stops comes back after about this long, to another worker. */
const STOPPING_DEFER_MS = 5_000;
/** A delivery this worker cannot prepare (its endpoint's secret does not open) comes back after about this long. */
const UNPREPARABLE_DEFER_MS = 60_000;
const LOAD_BATCH = 256;
const LOAD_LINGER_MS = 2;
const FLUSH_FAILURE_REDELIVERY_MS = 5_000;

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
  private readonly clock: Clock;
  private puller: DeliveryPuller | undefined;
  private readonly held: HeldMessages;
  /** Received deliveries, loaded from Postgres in batches. */
  private readonly loads: MicroBatcher<Held>;
  private readonly lanes: EndpointLanes<Routed>;
  private readonly attempts: DeliveryAttempts;
  private readonly recorder: OutcomeRecorder<Held>;
  private readonly rotatedSecrets: RotatedSecrets;
  private readonly strays: StrayMessages;
  private readonly parkingLog: ParkingLog;
  private readonly rateLimit: EndpointRateLimit;
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  private resumeTimer: NodeJS.Timeout | undefined;

  constructor(options: DeliveryWorkerOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.strays = new StrayMessages(options.log, options.metrics);
    this.held = new HeldMessages(this.strays);
    this.parkingLog = new ParkingLog(this.clock);
    this.rotatedSecrets = new RotatedSecrets({ db: options.db, databaseUrl: options.databaseUrl, log: options.log });
    const policy = deliveryPolicy(options.retryPolicy);
    this.attempts = new DeliveryAttempts({ ...options, rotatedSecrets: this.rotatedSecrets, policy, clock: this.clock });
    this.loads = new MicroBatcher<Held>({
      size: LOAD_BATCH,
      lingerMs: LOAD_LINGER_MS,
      concurrency: Number.POSITIVE_INFINITY,
      clock: this.clock,
      write: (batch) => this.load(batch),
      onError: (error, batch) => {
        this.options.log.warn({ err: error, messages: batch.length }, 'could not load deliveries; they will be redelivered');
        for (const held of batch) this.held.settle(held, FLUSH_FAILURE_REDELIVERY_MS);
      },
    });
    this.rateLimit = new EndpointRateLimit({ redis: options.redis, clock: this.clock, log: options.log, metrics: options.metrics });
    this.lanes = new EndpointLanes<Routed>({
      concurrency: options.endpointConcurrency,
      maxInFlight: options.maxSockets,
      send: (_, routed) =>
        this.attempt(routed).catch((thrown: unknown) => {
          this.attemptImpossible(routed.held, routed.work, thrown);
          return false;
        }),
      onSlotFreed: () => this.puller?.maybeResume(),
      permits: (endpointId, ratePerS, wanted) => this.rateLimit.take(endpointId, ratePerS, wanted),
      later: (ms, run) => void this.clock.setTimer(run, ms),
      now: () => this.clock.now(),
    });
    registerWebhookRequestsInFlight(options.metrics.registry, () => this.lanes.requestsInFlight, options.maxSockets);
    this.recorder = new OutcomeRecorder<Held>({
      writer: options.writer,
      policy,
      log: options.log,
      metrics: options.metrics,
      clock: this.clock,
      onWritten: (batch, committed) => {
        for (const held of batch) this.held.settle(held, committed ? undefined : FLUSH_FAILURE_REDELIVERY_MS);
        this.puller?.maybeResume();
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
    this.keepAliveTimer = setInterval(() => this.held.keepAlive(), Math.max(500, Math.floor(this.options.ackWaitMs / 3))).unref();
    // A lane turning slow (a receiver that stopped answering) gives back its excess queue and frees the
    // backpressure without any request finishing, so both are checked on a timer too.
    this.resumeTimer = setInterval(() => {
      for (const { endpointId, item } of this.lanes.trimSlowLanes()) this.park(item.held, endpointId);
      this.puller?.maybeResume();
      this.parkingLog.forgetQuiet();
      this.rateLimit.forgetIdle();
    }, 250).unref();
    this.puller = new DeliveryPuller({
      consumer,
      log: this.options.log,
      heldForFastEndpoints: () => this.heldForFastEndpoints(),
      receive: (message) => this.receive(message),
      clock: this.clock,
    });
    this.puller.start();
  }

  /** Stops pulling, finishes requests in flight, writes their outcomes; queued messages go back unacked. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.puller?.stop();
    for (const { held } of this.lanes.takeWaiting()) this.held.settle(held, 0);
    for (const held of this.loads.takeWaiting()) this.held.settle(held, 0);
    await this.loads.idle();
    await this.lanes.idle();
    await this.recorder.flushAll();
    clearInterval(this.keepAliveTimer);
    clearInterval(this.resumeTimer);
    await this.rotatedSecrets.stop();
  }

  private receive(message: JsMsg): void {
    const publisher = publisherOf(message.headers);
    if (publisher !== undefined && publisher !== this.options.names.deploymentId) {
      this.strays.leave(message, publisher);
      return;
    }
    if (this.held.refresh(message)) return;
    const deliveries = decodeDeliveryMessage(message.data);
    if (!deliveries) {
      this.options.log.warn({ stream_seq: message.info.streamSequence }, 'undecodable delivery message dropped');
      message.term();
      return;
    }
    for (const held of this.held.take(message, deliveries, publisher !== undefined)) this.loads.add(held);
  }

  /** Held messages of endpoints that have shown they keep up; others cannot stop the worker from pulling. */
  private heldForFastEndpoints(): number {
    return this.held.size - this.lanes.heldByUnprovenEndpoints();
  }

  private async load(batch: Held[]): Promise<void> {
    const secretsGeneration = this.rotatedSecrets.generation();
    const work = await loadDeliveryWork(this.options.db, [...new Set(batch.map((held) => held.deliveryId))]);
    for (const held of batch) this.route(held, work.get(held.deliveryId), secretsGeneration);
  }

  /** Carries out what a loaded message needs (deliveryRouting.ts). */
  private route(held: Held, loaded: DeliveryWork | undefined, secretsGeneration: number): void {
    const route = routeDelivery({ attempt: held.attempt, provablyOurs: held.ticket.provablyOurs }, loaded, this.stopping);
    if (!('work' in route)) {
      if (route.kind === 'stray') this.held.markStray(held);
      this.held.settle(held);
      return;
    }
    const { work } = route;
    if (route.kind === 'cancel')
      this.record(held, work.endpoint.id, { kind: 'cancelled', deliveryId: held.deliveryId, attempt: held.attempt }, work.endpoint.ordered);
    else if (route.kind === 'defer') this.defer(held, work.endpoint.id, STOPPING_DEFER_MS);
    else if (this.lanes.admit(work.endpoint.id, { held, work, secretsGeneration }, laneLimitsOf(work.endpoint)) === 'overflow')
      this.park(held, work.endpoint.id);
  }

  /**
   * Every slot of the endpoint is busy and its queue is full: the delivery waits in Postgres, parked, until
   * requests to the endpoint finish (each releases one; outcomeRecorder.ts). Its requests in flight here
   * are recorded after this (the recorder keeps order), so at least one release follows every parking; no
   * attempt is counted. A deferral to a due time instead made a hung endpoint's whole backlog come back
   * through the relay, JetStream and this worker every few seconds.
   */
  private park(held: Held, endpointId: string): void {
    deliveryMetrics(this.options.metrics).parked.inc();
    this.record(held, endpointId, { kind: 'parked', deliveryId: held.deliveryId, attempt: held.attempt });
    const parked = this.parkingLog.parked(endpointId);
    if (parked === undefined) return;
    this.options.log.warn(
      { endpoint_id: endpointId, parked, concurrency: this.options.endpointConcurrency },
      'webhook endpoint saturated (every request slot busy): its further deliveries are parked until requests to it finish',
    );
  }

  /** Puts a delivery back in Postgres, due again after about `aboutMs`; no attempt is counted. */
  private defer(held: Held, endpointId: string, aboutMs: number): void {
    deliveryMetrics(this.options.metrics).deferred.inc();
    const dueAt = new Date(this.clock.now() + spread(aboutMs, [0.5, 1.5]));
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
    const result = await this.attempts.make(held, work, secretsGeneration);
    switch (result.kind) {
      case 'secrets unreadable':
        this.defer(held, work.endpoint.id, FLUSH_FAILURE_REDELIVERY_MS);
        return false;
      case 'gone':
        this.held.settle(held);
        return false;
      case 'attempted':
        this.record(held, work.endpoint.id, result.outcome, work.endpoint.ordered);
        return result.answered;
    }
  }

  /** `awaited`: an ordered endpoint's next delivery waits for this outcome to be recorded. */
  private record(held: Held, endpointId: string, outcome: DeliveryOutcome, awaited = false): void {
    this.recorder.add({ settles: held, endpointId, outcome, awaited });
  }
}
