import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { BusConnection } from '../bus/natsConnection.ts';
import type { BusNames } from '../bus/jetStreamDefinitions.ts';
import type { Queryable } from '../db/database.ts';
import { returnToRelays } from './deliveryOutbox.ts';
import type { NewDeliveryPublisher } from '../events/eventWriter.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { MAX_DELIVERIES_PER_MESSAGE, publishDeliveryMessages } from './deliveryMessage.ts';
import { DeferredConfirmations } from './publicationConfirmations.ts';
import { deliveryMetrics } from './deliveryMetrics.ts';

export interface DeliveryPublisherOptions {
  readonly db: Queryable;
  readonly bus: BusConnection;
  readonly names: BusNames;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  /** What pauses after a failure and the confirmations' delay are timed by. */
  readonly clock?: Clock;
}

/**
 * Messages being published at most; beyond this (JetStream slow to answer) writes leave their deliveries to
 * the relays, so a backed-up NATS cannot make an ingest pod hold an unbounded backlog in memory.
 */
const MAX_MESSAGES_IN_FLIGHT = 1_000;
/** After a failed publish, writes leave their deliveries to the relays this long before trying again. */
const PAUSE_AFTER_FAILURE_MS = 5_000;

/**
 * Publishes the deliveries of the events its process writes, right after the write commits, so that they
 * skip the outbox: written marked published (fanOut.ts), they are neither
 * claimed by a relay nor woken for: the relay's work per event, its Postgres work and the end-to-end rate
 * are in BENCHMARKS.md, "Events written and delivered: ingest publishes their deliveries".
 *
 * The outbox stays the guarantee. Deliveries whose message JetStream did not accept are handed back to the
 * relays at once (returnToRelays); each publication JetStream accepted is confirmed in Postgres, so those
 * of a process that dies between its commit and its publish are made due again by the relays within about
 * 10 s, whatever holds the consumer's ack floor back (publicationConfirmations.ts). The confirmation is
 * written a few seconds later, for the deliveries still in flight then: most are handled by then and cost
 * nothing more. While NATS is disconnected, after a failure, or with too many messages unanswered, `accepting` is
 * false and writes leave their deliveries to the relays as before. Retries, released parked deliveries and
 * replays are always the relays'.
 */
export class DeliveryPublisher implements NewDeliveryPublisher {
  private readonly options: DeliveryPublisherOptions;
  private readonly js: JetStreamClient;
  private readonly target: { readonly subject: string; readonly deploymentId: string };
  private readonly inFlight = new Set<Promise<void>>();
  private readonly confirmations: DeferredConfirmations;
  private readonly clock: Clock;
  private messagesInFlight = 0;
  private pausedUntil = 0;
  private stopping = false;

  constructor(options: DeliveryPublisherOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.js = jetstream(options.bus.nc);
    this.confirmations = new DeferredConfirmations({ db: options.db, log: options.log, clock: this.clock });
    this.target = { subject: options.names.deliverySubject(), deploymentId: options.names.deploymentId };
  }

  /** Whether a write now should mark its deliveries published and hand them here. */
  get accepting(): boolean {
    return (
      !this.stopping &&
      this.options.bus.connected() &&
      this.messagesInFlight < MAX_MESSAGES_IN_FLIGHT &&
      this.clock.now() >= this.pausedUntil
    );
  }

  /**
   * Publishes the first attempt of committed deliveries written marked published. Returns at once: a
   * producer's write does not wait for NATS, and what fails goes to the relays.
   */
  publish(ids: readonly string[]): void {
    if (ids.length === 0) return;
    const messages = Math.ceil(ids.length / MAX_DELIVERIES_PER_MESSAGE);
    this.messagesInFlight += messages;
    const task = this.publishNow(ids)
      // Not expected (publishNow settles its own failures), but a rejection nobody awaits would end the process.
      .catch((thrown: unknown) =>
        this.options.log.error(
          { err: coerceError(thrown) },
          'publishing new deliveries failed; the lost-publication sweep will publish them',
        ),
      )
      .finally(() => {
        this.messagesInFlight -= messages;
        this.inFlight.delete(task);
      });
    this.inFlight.add(task);
  }

  /** Stops accepting, waits for the publishes under way (before the NATS connection closes) and writes their confirmations. */
  async drain(): Promise<void> {
    this.stopping = true;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    await this.confirmations.flush();
  }

  private async publishNow(ids: readonly string[]): Promise<void> {
    const due = ids.map((id) => ({ id, attempt: 1, publication: 1 }));
    const publishStartedAt = this.clock.now();
    const { published, failed, error } = await publishDeliveryMessages(this.js, this.target, due);
    deliveryMetrics(this.options.metrics).published.inc(due.length - failed.length);
    this.confirmations.add(published, publishStartedAt);
    if (failed.length === 0) return;
    this.pausedUntil = this.clock.now() + PAUSE_AFTER_FAILURE_MS;
    this.options.metrics.errors.inc({ kind: 'publish_on_write_failed' });
    try {
      const returned = await returnToRelays(
        this.options.db,
        failed.map((delivery) => delivery.id),
      );
      this.options.log.warn(
        { err: coerceError(error), failed: failed.length, returned },
        'could not publish new deliveries; the relays publish them',
      );
    } catch (thrown) {
      // Still marked published: the relays' lost-publication sweep finds them.
      this.options.log.warn(
        { err: coerceError(thrown), publishError: coerceError(error).message, failed: failed.length },
        'could not publish new deliveries nor hand them to the relays; the lost-publication sweep will',
      );
    }
  }
}
