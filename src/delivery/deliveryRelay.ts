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
import { DELIVERIES_PENDING_CHANNEL, OLD_DUE_TIMES_PAYLOAD, QUEUED_PAYLOAD, REPLAYS_PAYLOAD } from './relayWakeUp.ts';
import { startIdleOrderedEndpoints } from './orderedDeliveries.ts';
import { takeDueDeliveries, unmarkPublished, unparkOldestPerEndpoint } from './deliveryOutbox.ts';
import { PUBLISH_TIMEOUT_MS, publishDeliveryMessages } from './deliveryMessage.ts';
import { LostPublications } from './lostPublications.ts';
import { DeferredConfirmations, UNCONFIRMED_AFTER_MS, releaseUnconfirmedPublications } from './publicationConfirmations.ts';
import { deliveryMetrics } from './deliveryMetrics.ts';

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

const BATCH_SIZE = 500;
/** Publications unconfirmed for UNCONFIRMED_AFTER_MS (publicationConfirmations.ts) are looked for this often. */
const UNCONFIRMED_SWEEP_MS = 2_000;
/**
 * With nothing in flight at the last sweep, only a publication made since can be lost, and one made just
 * after it is found at UNCONFIRMED_AFTER_MS plus this: within the documented 20 s (docs/operations.md, "Lost
 * publications"). Ingest publishes without telling the relays, so an idle relay cannot wait for a sign.
 */
const IDLE_UNCONFIRMED_SWEEP_MS = 6_000;
const ERROR_BACKOFF_MS = 1_000;
const MIN_IDLE_MS = 20;
/**
 * Quick passes (see passFloor) start this far before the last full pass, which covers deliveries written by
 * transactions that began a little before it (a row's due time is its transaction's start) ...
 */
const FLOOR_MARGIN_MS = 1_000;
/** ... and a full pass at least this often takes whatever the quick ones cannot see. */
const FULL_PASS_INTERVAL_MS = 1_000;

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
  private nextParkedSweepAt = 0;
  /** Deliveries of ordered endpoints were queued (or may have been): start the next of each idle one. */
  private queuedWaiting = true;
  private nextQueuedSweepAt = 0;
  /** Where quick passes start; undefined until a full pass has emptied the outbox of due deliveries. */
  private floor: Date | undefined;
  private nextFullPassAt = 0;
  private nextUnconfirmedSweepAt = 0;
  /** Counts forgetFloor calls, so that a full pass does not set a floor something made unsafe meanwhile. */
  private floorsForgotten = 0;
  /**
   * A notification came since the last full pass: rows of a transaction older than the floor's margin may
   * have come with it, which only a full pass sees. Without one, nothing new was written, and an idle relay
   * need not look again before pollMs.
   */
  private wokenSinceFullPass = false;
  /**
   * When the outbox must be looked at next (the clock's time): the next due time, or pollMs after the last
   * look. A pass that only runs a sweep skips the look; a notification makes it at once.
   */
  private lookAt = 0;

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
        return ERROR_BACKOFF_MS;
      },
    });
    this.listener = new NotificationListener({
      databaseUrl: options.databaseUrl,
      channel: DELIVERIES_PENDING_CHANNEL,
      name: 'audit-trail delivery-relay',
      log: options.log,
      onNotification: (payload) => {
        this.wokenSinceFullPass = true;
        this.lookAt = 0;
        if (payload === OLD_DUE_TIMES_PAYLOAD) this.forgetFloor();
        if (payload === QUEUED_PAYLOAD) this.queuedWaiting = true;
        if (payload === REPLAYS_PAYLOAD) return this.options.onReplays?.();
        this.loop.wake();
      },
      // Notifications may have been missed, released parked deliveries and queued ones among them.
      onGap: () => {
        this.lookAt = 0;
        this.forgetFloor();
        this.queuedWaiting = true;
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
   * One pass: the lost-publication sweep and the parked deliveries' release when due, then the due
   * deliveries. A full batch means more are probably due: the next pass comes at once; otherwise the relay
   * sleeps until the next delivery falls due (a notification wakes it sooner).
   */
  private async pass(): Promise<NextPass> {
    // Released lost publications keep their old due times: the pass after the sweep is a full one.
    if ((await this.lostPublications!.sweepIfDue()) + (await this.releaseUnconfirmedIfDue()) > 0) this.forgetFloor();
    await this.releaseParkedIfDue();
    await this.startQueuedIfDue();
    if (this.clock.now() < this.lookAt) return this.idleTime();
    const { published, failed, nextDueInMs } = await this.publishDue();
    if (failed) return { backoffMs: ERROR_BACKOFF_MS };
    if (published >= BATCH_SIZE || this.loop.woken) return 0;
    this.lookAt = this.clock.now() + Math.min(this.options.pollMs, nextDueInMs ?? Number.POSITIVE_INFINITY);
    return this.idleTime();
  }

  /**
   * Publications never confirmed (publicationConfirmations.ts): their publisher died between marking and
   * publishing. Made due again UNCONFIRMED_AFTER_MS after they were marked, whatever else is going on.
   */
  private async releaseUnconfirmedIfDue(): Promise<number> {
    if (this.clock.now() < this.nextUnconfirmedSweepAt) return 0;
    this.nextUnconfirmedSweepAt = this.clock.now() + UNCONFIRMED_SWEEP_MS;
    const { released, inFlight } = await releaseUnconfirmedPublications(this.options.db, UNCONFIRMED_AFTER_MS);
    if (inFlight === 0 && released === 0) this.nextUnconfirmedSweepAt = this.clock.now() + IDLE_UNCONFIRMED_SWEEP_MS;
    if (released > 0) {
      deliveryMetrics(this.options.metrics).republished.inc(released);
      this.options.log.warn(
        { released },
        'republishing deliveries whose publication was never confirmed (their publisher stopped before publishing)',
      );
    }
    return released;
  }

  /**
   * Until the next retry falls due, at most pollMs: a retry one second out is published on time rather than
   * at the next poll, so its ±20 % jitter is not swamped by the poll interval. With nothing waiting and
   * nothing heard, until pollMs, or the next of the sweeps this pass runs: an idle relay rests (BENCHMARKS.md,
   * "An idle deployment").
   */
  private idleTime(): number {
    const now = this.clock.now();
    // While quick passes run after a notification, a full one comes at least every FULL_PASS_INTERVAL_MS.
    if (this.floor !== undefined && this.wokenSinceFullPass) this.lookAt = Math.min(this.lookAt, this.nextFullPassAt);
    const next = Math.min(
      this.lookAt,
      this.nextUnconfirmedSweepAt,
      this.nextParkedSweepAt,
      this.nextQueuedSweepAt,
      now + this.lostPublications!.untilNextSweepMs(),
    );
    return Math.max(MIN_IDLE_MS, next - now);
  }

  /**
   * Parked deliveries are released by requests to their endpoint finishing (outcomeRecorder.ts). This
   * releases one per endpoint every ack wait besides, so that an endpoint's parked deliveries move on even
   * if nothing of it is left in flight to release them: at most one extra publication per parked endpoint
   * and ack wait, whatever its backlog.
   */
  private async releaseParkedIfDue(): Promise<void> {
    if (this.clock.now() < this.nextParkedSweepAt) return;
    this.nextParkedSweepAt = this.clock.now() + Math.max(1_000, this.options.ackWaitMs);
    const released = await unparkOldestPerEndpoint(this.options.db);
    if (released > 0) {
      deliveryMetrics(this.options.metrics).unparked.inc({ by: 'sweep' }, released);
      this.forgetFloor();
    }
  }

  /**
   * Ordered endpoints' first deliveries (orderedDeliveries.ts): when a notification says some were queued, and
   * every ack wait besides, as the safety net under the outcome recorder's start of the next one. They are due
   * now, so this pass publishes them.
   */
  private async startQueuedIfDue(): Promise<void> {
    if (!this.queuedWaiting && this.clock.now() < this.nextQueuedSweepAt) return;
    this.queuedWaiting = false;
    this.nextQueuedSweepAt = this.clock.now() + Math.max(1_000, this.options.ackWaitMs);
    await startIdleOrderedEndpoints(this.options.db).catch((error: unknown) => {
      this.queuedWaiting = true;
      throw error;
    });
  }

  /**
   * Where this pass starts in the outbox's due order: nowhere (a full pass) or the floor (a quick pass). A
   * full pass walks every dead index entry earlier passes left behind (deliveryOutbox.ts,
   * takeDueDeliveries); once one found fewer due deliveries than it could take, nothing was left due before
   * its clock, and later passes start just before it. Deliveries made due with an earlier due time are
   * released parked ones (a notification says so), lost publications and failed publishes put back (this
   * relay's own doing), and rows of transactions older than the margin: the first three make the next
   * pass full, and a full pass every FULL_PASS_INTERVAL_MS takes the last.
   */
  private passFloor(): Date | undefined {
    if (this.floor !== undefined && this.clock.now() < this.nextFullPassAt) return this.floor;
    this.floor = undefined;
    this.wokenSinceFullPass = false;
    return undefined;
  }

  /** Deliveries may have been made due below the floor: the next pass is a full one. */
  private forgetFloor(): void {
    this.lookAt = 0;
    this.floor = undefined;
    this.floorsForgotten += 1;
  }

  /** Takes due deliveries, publishes them in batches, puts back those JetStream did not accept. */
  private async publishDue(): Promise<{ published: number; failed: boolean; nextDueInMs: number | undefined }> {
    const floor = this.passFloor();
    const forgottenBefore = this.floorsForgotten;
    const { due, now, nextDueInMs } = await takeDueDeliveries(this.options.db, BATCH_SIZE, floor);
    // A release heard while the pass ran may have committed after the pass's snapshot: no floor from it.
    if (floor === undefined && due.length < BATCH_SIZE && this.floorsForgotten === forgottenBefore) {
      this.floor = new Date(now.getTime() - FLOOR_MARGIN_MS);
      this.nextFullPassAt = this.clock.now() + FULL_PASS_INTERVAL_MS;
    }
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
      this.forgetFloor();
    }
    deliveryMetrics(this.options.metrics).published.inc(due.length - failed.length);
    return { published: due.length - failed.length, failed: failed.length > 0, nextDueInMs };
  }
}
