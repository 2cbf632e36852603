import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { BusConnection } from '../bus/natsConnection.ts';
import { deliveryConsumerDefinition, ensureConsumer, type BusNames } from '../bus/jetStreamDefinitions.ts';
import type { Database } from '../db/database.ts';
import { NotificationListener } from '../db/notificationListener.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import { coerceError } from '../platform/errors.ts';
import { PollLoop, type NextPass } from '../platform/pollLoop.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { DELIVERIES_PENDING_CHANNEL } from './relayWakeUp.ts';
import { startIdleOrderedEndpoints } from './orderedDeliveries.ts';
import { takeDueDeliveries, unmarkPublished, unparkOldestPerEndpoint } from './deliveryOutbox.ts';
import { PUBLISH_TIMEOUT_MS, publishDeliveryMessages } from './deliveryMessage.ts';
import { LostPublications } from './lostPublications.ts';
import { DeferredConfirmations, UNCONFIRMED_AFTER_MS, releaseUnconfirmedPublications } from './publicationConfirmations.ts';
import { deliveryMetrics } from './deliveryMetrics.ts';
import {
  RELAY_BATCH_SIZE,
  RELAY_FAILURE_BACKOFF_MS,
  STARTING_SCHEDULE,
  afterLook,
  dueTaken,
  forgetFloor,
  mustLook,
  notificationsMissed,
  notified,
  passFloor,
  queuedSweepFailed,
  released,
  restTime,
  sweepDue,
  sweepStarted,
  unconfirmedSwept,
  type RelaySchedule,
  type RelaySweep,
} from './relaySchedule.ts';

export interface DeliveryRelayOptions {
  readonly db: Database;
  readonly databaseUrl: string;
  readonly bus: BusConnection;
  readonly names: BusNames;
  /** Replicas of the AUDIT_DELIVERIES stream (NATS_STREAM_REPLICAS); 1 by default. */
  readonly streamReplicas?: number;
  /**
   * DELIVERY_ACK_WAIT_MS: lost messages are looked for about twice as often, and each endpoint's oldest
   * parked delivery is released this often.
   */
  readonly ackWaitMs: number;
  /**
   * The longest the relay sleeps between looks at the outbox. New deliveries and newly scheduled retries
   * wake it through NOTIFY, and it wakes when the next retry falls due, so this only bounds how late a
   * notification lost while its LISTEN connection was down is made up for.
   */
  readonly pollMs: number;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  /** A replay was created, or notifications may have been missed: look for replays to run now. */
  readonly onReplays?: () => void;
  /** What the relay schedules its passes and sweeps by. */
  readonly clock?: Clock;
}

/**
 * The outbox relay: publishes due deliveries (new ones and retries whose time has come) to the
 * AUDIT_DELIVERIES work queue. Several relays may run at once; they share the outbox through SKIP LOCKED.
 */
export class DeliveryRelay {
  private readonly options: DeliveryRelayOptions;
  private readonly clock: Clock;
  private readonly listener: NotificationListener;
  private js: JetStreamClient | undefined;
  private subject = '';
  private readonly loop: PollLoop;
  private lostPublications: LostPublications | undefined;
  private readonly confirmations: DeferredConfirmations;
  /** When to look, sweep and rest (relaySchedule.ts); notifications change it during a pass too. */
  private schedule: RelaySchedule = STARTING_SCHEDULE;

  constructor(options: DeliveryRelayOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.confirmations = new DeferredConfirmations({ db: options.db, log: options.log, clock: this.clock });
    this.loop = new PollLoop({
      clock: this.clock,
      pass: () => this.pass(),
      onError: (error) => {
        this.options.log.warn({ err: error }, 'delivery relay pass failed; retrying');
        this.options.metrics.errors.inc({ kind: 'relay_failed' });
        return RELAY_FAILURE_BACKOFF_MS;
      },
    });
    this.listener = new NotificationListener({
      databaseUrl: options.databaseUrl,
      channel: DELIVERIES_PENDING_CHANNEL,
      name: 'audit-trail delivery-relay',
      log: options.log,
      onNotification: (payload) => {
        const heard = notified(this.schedule, payload);
        this.schedule = heard.schedule;
        if (heard.replays) return this.options.onReplays?.();
        this.loop.wake();
      },
      onGap: () => {
        this.schedule = notificationsMissed(this.schedule);
        this.loop.wake();
        this.options.onReplays?.();
      },
    });
  }

  async start(): Promise<void> {
    const definition = deliveryConsumerDefinition(this.options.names, this.options.ackWaitMs, this.options.streamReplicas);
    const jsm = await jetstreamManager(this.options.bus.nc);
    await ensureConsumer(jsm, definition);
    this.js = jetstream(this.options.bus.nc);
    this.lostPublications = new LostPublications({
      db: this.options.db,
      jsm,
      stream: definition.stream.name,
      consumer: definition.consumer.durable_name,
      intervalMs: Math.max(1_000, this.options.ackWaitMs / 2),
      publishLagMs: PUBLISH_TIMEOUT_MS,
      log: this.options.log,
      metrics: this.options.metrics,
      clock: this.clock,
    });
    this.subject = this.options.names.deliverySubject();
    await this.listener.start();
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    await this.confirmations.flush();
    await this.listener.stop();
  }

  /**
   * One pass: the sweeps that are due, then the due deliveries if the schedule says to look. A full batch
   * means more are probably due: the next pass comes at once; otherwise the relay rests until the next
   * delivery falls due (a notification wakes it sooner).
   */
  private async pass(): Promise<NextPass> {
    // Released lost publications keep their old due times: the pass after the sweep is a full one.
    const lost = await this.lostPublications!.sweepIfDue();
    this.schedule = released(this.schedule, lost);
    await this.sweepIfDue('unconfirmed', () => this.releaseUnconfirmed());
    await this.sweepIfDue('parked', () => this.releaseParked());
    await this.sweepIfDue('queued', () => this.startQueued());
    const untilLostSweepMs = () => this.lostPublications!.untilNextSweepMs();
    if (!mustLook(this.schedule, this.clock.now())) return this.rest(untilLostSweepMs());
    const look = await this.publishDue();
    const next = afterLook(this.schedule, { ...look, woken: this.loop.woken }, this.clock.now(), {
      pollMs: this.options.pollMs,
      untilLostSweepMs: untilLostSweepMs(),
    });
    this.schedule = next.schedule;
    return next.next;
  }

  private rest(untilLostSweepMs: number): number {
    const rest = restTime(this.schedule, this.clock.now(), untilLostSweepMs);
    this.schedule = rest.schedule;
    return rest.restMs;
  }

  private async sweepIfDue(sweep: RelaySweep, run: () => Promise<void>): Promise<void> {
    if (!sweepDue(this.schedule, sweep, this.clock.now())) return;
    this.schedule = sweepStarted(this.schedule, sweep, this.clock.now(), this.options);
    await run();
  }

  /**
   * Publications never confirmed (publicationConfirmations.ts): their publisher died between marking and
   * publishing. Made due again UNCONFIRMED_AFTER_MS after they were marked, whatever else is going on.
   */
  private async releaseUnconfirmed(): Promise<void> {
    const found = await releaseUnconfirmedPublications(this.options.db, UNCONFIRMED_AFTER_MS);
    this.schedule = unconfirmedSwept(this.schedule, found, this.clock.now());
    if (found.released > 0) {
      deliveryMetrics(this.options.metrics).republished.inc(found.released);
      this.options.log.warn(
        { released: found.released },
        'republishing deliveries whose publication was never confirmed (their publisher stopped before publishing)',
      );
    }
  }

  /**
   * Parked deliveries are released by requests to their endpoint finishing (outcomeRecorder.ts). This
   * releases one per endpoint every ack wait besides, so that an endpoint's parked deliveries move on even
   * if nothing of it is left in flight to release them: at most one extra publication per parked endpoint
   * and ack wait, whatever its backlog.
   */
  private async releaseParked(): Promise<void> {
    const count = await unparkOldestPerEndpoint(this.options.db);
    this.schedule = released(this.schedule, count);
    if (count > 0) deliveryMetrics(this.options.metrics).unparked.inc({ by: 'sweep' }, count);
  }

  /**
   * Ordered endpoints' first deliveries (orderedDeliveries.ts): when a notification says some were queued, and
   * every ack wait besides, as the safety net under the outcome recorder's start of the next one. They are due
   * now, so this pass publishes them.
   */
  private async startQueued(): Promise<void> {
    await startIdleOrderedEndpoints(this.options.db).catch((error: unknown) => {
      this.schedule = queuedSweepFailed(this.schedule);
      throw error;
    });
  }

  /** Takes due deliveries (from the schedule's floor), publishes them in batches, puts back those JetStream did not accept. */
  private async publishDue(): Promise<{ published: number; failed: boolean; nextDueInMs: number | undefined }> {
    const start = passFloor(this.schedule, this.clock.now());
    this.schedule = start.schedule;
    const { due, now, nextDueInMs } = await takeDueDeliveries(this.options.db, RELAY_BATCH_SIZE, start.floor);
    this.schedule = dueTaken(this.schedule, { ...start, taken: due.length, snapshotAt: now }, this.clock.now());
    if (due.length === 0) return { published: 0, failed: false, nextDueInMs };
    const publishStartedAt = this.clock.now();
    const { published, failed, error } = await publishDeliveryMessages(
      this.js!,
      { subject: this.subject, deploymentId: this.options.names.deploymentId },
      due,
    );
    this.confirmations.add(published, publishStartedAt);
    if (failed.length > 0) {
      this.options.log.warn({ err: coerceError(error), failed: failed.length }, 'could not publish deliveries; they stay due');
      this.options.metrics.errors.inc({ kind: 'relay_failed' });
      await unmarkPublished(
        this.options.db,
        failed.map((delivery) => delivery.id),
      );
      this.schedule = forgetFloor(this.schedule);
    }
    deliveryMetrics(this.options.metrics).published.inc(due.length - failed.length);
    return { published: due.length - failed.length, failed: failed.length > 0, nextDueInMs };
  }
}
