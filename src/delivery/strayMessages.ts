import type { JsMsg } from '@nats-io/jetstream';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';

/** Stream sequences remembered as reported; beyond this the oldest are forgotten (and may be reported again). */
const REPORTED_CAPACITY = 10_000;
/** A stray comes back after about this long per delivery so far, within these bounds. */
const REDELIVERY_STEP_MS = 1_000;
const MAX_REDELIVERY_MS = 30_000;

/**
 * Delivery messages a worker must not settle, because they may be another deployment's: those that name
 * another deployment, and those that name none (published by an earlier version) whose delivery is not in
 * our database. Acknowledging one would lose its delivery until the owner's relay republishes it minutes
 * later, so it is given back to JetStream, which hands it to another member of the consumer, in time the
 * owner's. Each is reported once (a warning and `audit_errors_total{kind="delivery_foreign_message"}`),
 * however often it comes back: a shared stream is a misconfiguration an operator must fix, not a flood
 * of logs.
 */
export class StrayMessages {
  private readonly log: Logger;
  private readonly metrics: ServiceMetrics;
  private readonly reported = new Set<number>();

  constructor(log: Logger, metrics: ServiceMetrics) {
    this.log = log;
    this.metrics = metrics;
  }

  /** Leaves `message` for its owner: `publisher` when the message names one, else unknown. */
  leave(message: JsMsg, publisher: string | undefined): void {
    const sequence = message.info.streamSequence;
    if (!this.reported.has(sequence)) {
      this.remember(sequence);
      this.metrics.errors.inc({ kind: 'delivery_foreign_message' });
      this.log.warn(
        { stream: message.info.stream, stream_seq: sequence, publisher: publisher ?? null },
        publisher === undefined
          ? 'a delivery message without a deployment names deliveries this database does not have; left for its owner'
          : 'a delivery message of another deployment reached this worker; left for its owner (deployments sharing a NATS need their own NATS_NAMESPACE)',
      );
    }
    // Slower each time: an owner that is running gets it soon, one that is gone does not cost a busy loop.
    message.nak(Math.min(MAX_REDELIVERY_MS, REDELIVERY_STEP_MS * message.info.deliveryCount));
  }

  private remember(sequence: number): void {
    if (this.reported.size >= REPORTED_CAPACITY) this.reported.delete(this.reported.values().next().value!);
    this.reported.add(sequence);
  }
}
