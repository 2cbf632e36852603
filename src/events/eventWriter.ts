import type pg from 'pg';
import type { Database } from '../db/database.ts';
import { SQLSTATE, sqlState } from '../db/sqlstate.ts';
import { formatTimestamp, monthStartMs } from '../events/eventFields.ts';
import { ensureEventPartitions, type NewEvent, type StoredEventKey } from '../events/eventStore.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { awaitDurableRepeats } from './durableRepeats.ts';
import { BatchStatements, type DeliveryFanOut, type StoredBatch } from './storeBatch.ts';
import { StoredFormSetting } from './storedFormSetting.ts';
import { systemClock } from '../platform/clock.ts';
import { eventMetrics } from './eventMetrics.ts';

export interface WriteResult {
  readonly event_id: string;
  readonly timestamp: string;
  readonly status: 'stored' | 'duplicate';
}

/**
 * Publishes the deliveries of committed writes (delivery/deliveryPublisher.ts); declared here because the
 * trail does not depend on the delivery processes.
 */
export interface NewDeliveryPublisher {
  /** Whether a write now should leave its deliveries to this publisher rather than to the relays. */
  readonly accepting: boolean;
  /** Publishes committed deliveries written marked published; returns at once. */
  publish(deliveryIds: readonly string[]): void;
}

/**
 * The one write path into the trail: HTTP batches, JetStream messages and the service's own admin events
 * all end here, so validation, idempotency and fan-out behave the same whatever the input.
 */
export class EventWriter {
  private readonly db: Database;
  private readonly statements: BatchStatements;
  private readonly metrics: ServiceMetrics | undefined;
  private readonly publisher: NewDeliveryPublisher | undefined;
  private readonly storedForm: StoredFormSetting;
  // Month starts (epoch ms) whose partition is known to exist; saves a round trip per batch.
  private readonly knownPartitions = new Set<number>();

  /**
   * `fanOut` records the deliveries of what is stored, in the same statement. With a publisher, write()
   * hands it those deliveries while it accepts them.
   */
  constructor(db: Database, fanOut: DeliveryFanOut, metrics?: ServiceMetrics, publisher?: NewDeliveryPublisher) {
    this.db = db;
    this.statements = new BatchStatements(fanOut);
    this.metrics = metrics;
    this.publisher = publisher;
    this.storedForm = new StoredFormSetting(db);
  }

  /** Stores validated events in one statement; repeats of stored events are reported as duplicates. */
  async write(events: readonly NewEvent[], source: string): Promise<WriteResult[]> {
    if (events.length === 0) return [];
    await this.ensurePartitions(events);
    const timestamps = events.map((event) => formatTimestamp(event.occurredAtMs));
    const form = await this.storedForm.current();
    const publisher = this.publisher?.accepting ? this.publisher : undefined;
    const store = () => this.statements.store(this.db, { events, timestamps, form }, publisher ? 'writer' : 'relay');
    let batch: StoredBatch;
    try {
      batch = await store();
    } catch (error) {
      // 23514 is also what a row without a partition gets: one known here may have been dropped since
      // (retention detaches old months). Check them all again once before the batch counts as refused.
      if (sqlState(error) !== SQLSTATE.checkViolation) throw error;
      this.knownPartitions.clear();
      await this.ensurePartitions(events);
      batch = await store();
    }
    if (batch.stored.length < events.length) await awaitDurableRepeats(this.db);
    publisher?.publish(batch.deliveryIds);
    if (this.metrics) eventMetrics(this.metrics).ingested.inc({ source }, batch.stored.length);
    return writeResults(events, timestamps, batch.stored);
  }

  /**
   * Runs a change and records the events describing it in the same transaction, so that the trail holds
   * an admin action exactly when the action happened (`admin.key.create`, `admin.webhook.disable`, ...).
   * The events must be dated now.
   */
  async recordWith<T>(source: string, change: (client: pg.PoolClient) => Promise<{ result: T; events: NewEvent[] }>): Promise<T> {
    await this.ensurePartitions([{ occurredAtMs: systemClock.now() }]);
    const form = await this.storedForm.current();
    const { result, stored } = await this.db.transaction(async (client) => {
      const { result, events } = await change(client);
      const timestamps = events.map((event) => formatTimestamp(event.occurredAtMs));
      return { result, stored: (await this.statements.store(client, { events, timestamps, form }, 'relay')).stored };
    });
    if (this.metrics) eventMetrics(this.metrics).ingested.inc({ source }, stored.length);
    return result;
  }

  private async ensurePartitions(events: ReadonlyArray<{ readonly occurredAtMs: number }>): Promise<void> {
    const missing = new Set<number>();
    for (const { occurredAtMs } of events) {
      const month = monthStartMs(occurredAtMs);
      if (!this.knownPartitions.has(month)) missing.add(month);
    }
    if (missing.size === 0) return;
    // In a statement of its own: creating a partition briefly locks the parent table, and that lock must
    // not be held for the rest of a batch (or of an admin change's transaction).
    await ensureEventPartitions(this.db, [...missing]);
    for (const month of missing) this.knownPartitions.add(month);
  }
}

/** One result per item, in order: each stored row answers for one item, a repeat of it is a duplicate. */
function writeResults(events: readonly NewEvent[], timestamps: readonly string[], stored: readonly StoredEventKey[]): WriteResult[] {
  // A row is stored at most once per item, so as many rows as items means every item was stored.
  const storedKeys = stored.length === events.length ? undefined : new Set(stored.map(keyOf));
  return events.map((event, index) => ({
    event_id: event.eventId,
    timestamp: timestamps[index]!,
    status: storedKeys === undefined || storedKeys.delete(keyOf(event)) ? 'stored' : 'duplicate',
  }));
}

function keyOf(event: StoredEventKey): string {
  return `${event.tenantId}/${event.eventId}@${event.occurredAtMs}`;
}
