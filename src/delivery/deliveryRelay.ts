import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { BusConnection } from '../bus/natsConnection.ts';
import { deliveryConsumerDefinition, ensureConsumer, type BusNames } from '../bus/streams.ts';
import type { Database } from '../db/database.ts';
import { NotificationListener } from '../db/notificationListener.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import {
  DELIVERIES_PENDING_CHANNEL,
  takeDueDeliveries,
  timeUntilNextDue,
  unmarkPublished,
  unparkOldestPerEndpoint,
  type DueDelivery,
} from '../events/deliveryOutbox.ts';
import { deliveryHeaders, deliveryMessageId, encodeDeliveryMessage, MAX_DELIVERIES_PER_MESSAGE } from './deliveryMessage.ts';
import { LostPublications } from './lostPublications.ts';

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
}

const BATCH_SIZE = 500;
/** JetStream's answer to a publish is waited for this long; then the deliveries are put back. */
const PUBLISH_TIMEOUT_MS = 5_000;
const ERROR_BACKOFF_MS = 1_000;
const MIN_IDLE_MS = 20;

/**
 * The outbox relay: publishes due deliveries (new ones and retries whose time has come) to the
 * AUDIT_DELIVERIES work queue. Several relays may run at once; they share the outbox through SKIP LOCKED.
 */
export class DeliveryRelay {
  private readonly options: DeliveryRelayOptions;
  private readonly listener: NotificationListener;
  private js: JetStreamClient | undefined;
  private subject = '';
  private running: Promise<void> | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  private pendingWake = false;
  private lostPublications: LostPublications | undefined;
  private nextParkedSweepAt = 0;

  constructor(options: DeliveryRelayOptions) {
    this.options = options;
    this.listener = new NotificationListener({
      databaseUrl: options.databaseUrl,
      channel: DELIVERIES_PENDING_CHANNEL,
      name: 'audit-trail delivery-relay',
      log: options.log,
      onNotification: () => this.nudge(),
      onGap: () => this.nudge(),
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
    });
    this.subject = this.options.names.deliverySubject();
    await this.listener.start();
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.nudge();
    await this.running;
    await this.listener.stop();
  }

  private nudge(): void {
    this.pendingWake = true;
    this.wake?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let published = 0;
      try {
        this.pendingWake = false;
        await this.lostPublications!.sweepIfDue();
        await this.releaseParkedIfDue();
        published = await this.publishDue();
      } catch (thrown) {
        this.options.log.warn({ err: coerceError(thrown) }, 'delivery relay pass failed; retrying');
        this.options.metrics.errors.inc({ kind: 'relay_failed' });
        await this.sleep(ERROR_BACKOFF_MS);
        continue;
      }
      // A full batch means more are probably due: go again at once.
      if (published < BATCH_SIZE && !this.pendingWake) {
        const idleMs = await this.idleTime();
        // A notification that arrived while idleTime asked Postgres is not lost.
        if (!this.pendingWake) await this.sleep(idleMs);
      }
    }
  }

  /**
   * Until the next retry falls due, at most pollMs: a retry one second out is published on time rather than
   * at the next poll, so its ±20 % jitter is not swamped by the poll interval.
   */
  private async idleTime(): Promise<number> {
    const untilDue = await timeUntilNextDue(this.options.db).catch(() => undefined);
    if (untilDue === undefined) return this.options.pollMs;
    // Due already but not taken by this pass: another relay holds it and publishes it; do not spin.
    return Math.min(this.options.pollMs, Math.max(MIN_IDLE_MS, untilDue));
  }

  /**
   * Parked deliveries are released by requests to their endpoint finishing (outcomeRecorder.ts). This
   * releases one per endpoint every ack wait besides, so that an endpoint's parked deliveries move on even
   * if nothing of it is left in flight to release them: at most one extra publication per parked endpoint
   * and ack wait, whatever its backlog.
   */
  private async releaseParkedIfDue(): Promise<void> {
    if (Date.now() < this.nextParkedSweepAt) return;
    this.nextParkedSweepAt = Date.now() + Math.max(1_000, this.options.ackWaitMs);
    const released = await unparkOldestPerEndpoint(this.options.db);
    if (released > 0) this.options.metrics.webhookUnparked.inc({ by: 'sweep' }, released);
  }

  /** One pass: take due deliveries, publish them in batches, put back those JetStream did not accept. */
  private async publishDue(): Promise<number> {
    const due = await takeDueDeliveries(this.options.db, BATCH_SIZE);
    if (due.length === 0) return 0;
    const messages: DueDelivery[][] = [];
    for (let start = 0; start < due.length; start += MAX_DELIVERIES_PER_MESSAGE) messages.push(due.slice(start, start + MAX_DELIVERIES_PER_MESSAGE));
    const results = await Promise.allSettled(
      messages.map((deliveries) =>
        this.js!.publish(this.subject, encodeDeliveryMessage(deliveries.map(({ id, attempt }) => ({ deliveryId: id, attempt }))), {
          msgID: deliveryMessageId({ deliveryId: deliveries[0]!.id, attempt: deliveries[0]!.attempt }, deliveries[0]!.publication),
          headers: deliveryHeaders(this.options.names.deploymentId),
          timeout: PUBLISH_TIMEOUT_MS,
        }),
      ),
    );
    const failed = messages.filter((_, index) => results[index]!.status === 'rejected').flat();
    if (failed.length > 0) {
      const reason = (results.find((result) => result.status === 'rejected') as PromiseRejectedResult).reason;
      this.options.log.warn({ err: coerceError(reason), failed: failed.length }, 'could not publish deliveries; they stay due');
      this.options.metrics.errors.inc({ kind: 'relay_failed' });
      await unmarkPublished(this.options.db, failed.map((delivery) => delivery.id));
      await this.sleep(ERROR_BACKOFF_MS);
    }
    this.options.metrics.relayPublished.inc(due.length - failed.length);
    return due.length - failed.length;
  }

  /** Waits `ms`, or less when nudged (a NOTIFY, or stop()). */
  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }
}
