import { sleep } from '../platform/sleep.ts';
import type { Clock } from '../platform/clock.ts';
import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import { MAX_DELIVERIES_PER_MESSAGE } from './deliveryMessage.ts';

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

export interface DeliveryPullerOptions {
  readonly consumer: Consumer;
  readonly log: Logger;
  /** Deliveries the worker holds for endpoints that keep up: what backpressure counts. */
  readonly heldForFastEndpoints: () => number;
  /** Takes a message in at once (into a ticket kept alive). */
  readonly receive: (message: JsMsg) => void;
  /** Times the pause before pulling again after a failed pull. */
  readonly clock?: Clock;
}

/**
 * The delivery worker's pulls from its durable consumer. Pulls only as many messages as backpressure lets
 * the worker hold. With consume(), a batch already pulled waited in the client's buffer, unacknowledged and
 * without keep-alive, for as long as backpressure paused the worker: after the ack wait JetStream sent
 * those messages again, to this worker or another one, while their first copies were still to be read.
 */
export class DeliveryPuller {
  private readonly options: DeliveryPullerOptions;
  private pull: ConsumerMessages | undefined;
  private running: Promise<void> | undefined;
  private stopping = false;
  private resumePulling: (() => void) | undefined;

  constructor(options: DeliveryPullerOptions) {
    this.options = options;
  }

  start(): void {
    this.running = this.loop();
  }

  /** Ends the pull in progress; resolves when no message will be received any more. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.resumePulling?.();
    await this.pull?.close().catch(() => undefined);
    await this.running;
  }

  /** Something the worker held settled (or turned out slow): pulling resumes if backpressure allows. */
  maybeResume(): void {
    if (!this.resumePulling || this.options.heldForFastEndpoints() >= MAX_HELD_FOR_FAST_ENDPOINTS / 2) return;
    const resume = this.resumePulling;
    this.resumePulling = undefined;
    resume();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      const room = MAX_HELD_FOR_FAST_ENDPOINTS - this.options.heldForFastEndpoints();
      if (room < MAX_HELD_FOR_FAST_ENDPOINTS / 2) {
        await new Promise<void>((resolve) => (this.resumePulling = resolve));
        continue;
      }
      try {
        // Messages carry up to MAX_DELIVERIES_PER_MESSAGE deliveries.
        const pull = await this.options.consumer.fetch({
          max_messages: Math.ceil(room / MAX_DELIVERIES_PER_MESSAGE),
          expires: PULL_EXPIRES_MS,
        });
        this.pull = pull;
        if (this.stopping) await pull.close();
        for await (const message of pull) this.options.receive(message);
      } catch (thrown) {
        if (this.stopping) break;
        this.options.log.warn({ err: coerceError(thrown) }, 'pulling delivery messages failed; pulling again');
        await sleep(PULL_RETRY_MS, { clock: this.options.clock });
      }
    }
  }
}
