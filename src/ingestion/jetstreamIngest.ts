import { createHash } from 'node:crypto';
import { jetstream, jetstreamManager, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { BusConnection } from '../bus/natsConnection.ts';
import { ensureConsumer, ingestConsumerDefinition, type BusNames } from '../bus/jetStreamDefinitions.ts';
import { isRefusedData, sqlState } from '../db/sqlstate.ts';
import type { NewEvent } from '../events/eventStore.ts';
import { ServiceUnavailableError, ValidationError, coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { MicroBatcher } from '../platform/microBatcher.ts';
import { parseUtf8Json } from '../platform/utf8Json.ts';
import { parseEvent, type EventTimeWindow } from './eventInput.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { systemClock } from '../platform/clock.ts';

export interface JetStreamIngestOptions {
  readonly bus: BusConnection;
  readonly names: BusNames;
  /** Replicas of the AUDIT_INGEST stream (NATS_STREAM_REPLICAS); 1 by default. */
  readonly streamReplicas?: number;
  readonly writer: EventWriter;
  readonly window: EventTimeWindow;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
  /** Most messages written in one transaction. */
  readonly batchSize?: number;
  /** How long a partial batch waits for more messages before it is written anyway. */
  readonly lingerMs?: number;
}

// Batches written at once: one at a time leaves Postgres idle while Node decodes the next batch; three
// drained fastest (BENCHMARKS.md, "Ingest (issue 2)").
const CONCURRENT_WRITES = 3;

// A store outage makes every message of the batch come back after this long.
const RETRY_DELAY_MS = 5_000;

interface DecodedMessage {
  readonly message: JsMsg;
  readonly event: NewEvent;
}

/**
 * Consumes `audit.ingest.<tenant_id>`: one event per message, micro-batched into single-statement writes.
 * A message is acknowledged only after its transaction committed, so a crash means redelivery, and
 * redelivery is harmless: a message without event_id and timestamp gets both derived from its stream
 * sequence and stored time, which makes the write idempotent.
 */
export class JetStreamIngest {
  private readonly options: JetStreamIngestOptions;
  private messages: ConsumerMessages | undefined;
  private readonly batcher: MicroBatcher<JsMsg>;
  private running: Promise<void> | undefined;

  constructor(options: JetStreamIngestOptions) {
    this.options = options;
    // Each batch is its own transaction and acknowledges its own messages, so batches may commit in any
    // order (writes are idempotent).
    this.batcher = new MicroBatcher({
      size: options.batchSize ?? 1000,
      lingerMs: options.lingerMs ?? 10,
      concurrency: CONCURRENT_WRITES,
      write: (batch) => this.writeBatch(batch),
      // store() settles every message itself; this is for a bug in the settling.
      onError: (error, batch) => this.options.log.error({ err: error, messages: batch.length }, 'ingest batch failed unexpectedly'),
    });
  }

  async start(): Promise<void> {
    const definition = ingestConsumerDefinition(this.options.names, this.options.streamReplicas);
    await ensureConsumer(await jetstreamManager(this.options.bus.nc), definition);
    const consumer = await jetstream(this.options.bus.nc).consumers.get(definition.stream.name, definition.consumer.durable_name);
    const batchSize = this.options.batchSize ?? 1000;
    // Room for every concurrent write's batch plus the one filling up.
    this.messages = await consumer.consume({ max_messages: batchSize * (CONCURRENT_WRITES + 1) });
    this.running = this.consumeLoop(this.messages);
  }

  /** Stops pulling, writes what is buffered, and waits for the last write to settle. */
  async stop(): Promise<void> {
    await this.messages?.close().catch(() => undefined);
    await this.running;
    await this.batcher.drain();
  }

  /** While every write slot is busy and a full batch waits, the next message is not taken. */
  private async consumeLoop(messages: ConsumerMessages): Promise<void> {
    for await (const message of messages) {
      this.batcher.add(message);
      await this.batcher.room();
    }
  }

  private async writeBatch(batch: JsMsg[]): Promise<void> {
    const valid: DecodedMessage[] = [];
    for (const message of batch) {
      const event = this.decode(message);
      if (event) valid.push({ message, event });
    }
    await this.store(valid);
  }

  /**
   * Writes the events and acknowledges their messages. When Postgres refuses the data itself (an event
   * that passed validation but can never be stored), writing the batch again would fail again, forever,
   * and every valid event of every tenant in it would wait behind the bad one: the batch is halved until
   * each refused event stands alone and is terminated, so every storable event is stored within a few
   * statements. Any other failure (the store unreachable, a timeout, a lost race) is passing: the whole
   * batch is redelivered later.
   */
  private async store(items: readonly DecodedMessage[]): Promise<void> {
    if (items.length === 0) return;
    try {
      await this.options.writer.write(
        items.map((item) => item.event),
        'jetstream',
      );
      for (const { message } of items) message.ack();
    } catch (thrown) {
      const error = coerceError(thrown);
      if (isRefusedData(error)) {
        if (items.length === 1) return this.reject(items[0]!.message, 'refused by the event store', { sqlstate: sqlState(error) });
        const half = Math.ceil(items.length / 2);
        await this.store(items.slice(0, half));
        await this.store(items.slice(half));
        return;
      }
      if (error instanceof ServiceUnavailableError) {
        this.options.log.warn(
          { err: error.cause ?? error, messages: items.length },
          'event store unavailable; ingest messages will be redelivered',
        );
      } else {
        this.options.log.error({ err: error, messages: items.length }, 'ingest batch failed; messages will be redelivered');
      }
      this.options.metrics.errors.inc({ kind: 'ingest_write_failed' });
      for (const { message } of items) message.nak(RETRY_DELAY_MS);
    }
  }

  /**
   * Terminates a message that can never be stored, counted and logged by where it is and why, never by
   * its content (it may hold PHI; so may a Postgres error message, which is why only the SQLSTATE is kept).
   */
  private reject(message: JsMsg, reason: string, details?: unknown): undefined {
    this.options.log.warn(
      { subject: message.subject, stream_seq: message.info.streamSequence, reason, details },
      'ingest message rejected',
    );
    this.options.metrics.errors.inc({ kind: 'ingest_rejected' });
    // Plain term(): the NATS server here ignores term(reason).
    message.term();
    return undefined;
  }

  /** The event in a message, or undefined after terminating a message that can never be stored. */
  private decode(message: JsMsg): NewEvent | undefined {
    const reject = (reason: string, details?: unknown) => this.reject(message, reason, details);
    const tenantId = this.options.names.tenantOfIngestSubject(message.subject);
    if (!tenantId) return reject('subject is not audit.ingest.<tenant_id>');
    let body: unknown;
    try {
      // From the message's bytes: decoding them first would have turned invalid UTF-8 into U+FFFD.
      body = parseUtf8Json(message.data);
    } catch (error) {
      if (error instanceof ValidationError) return reject('invalid event', error.details);
      return reject('body is not JSON');
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return reject('body is not a JSON object');
    // The parsed body is this message's own object: filled in place rather than copied.
    const input = body as Record<string, unknown>;
    if (input.tenant_id === undefined) input.tenant_id = tenantId;
    if (input.tenant_id !== tenantId) return reject('tenant_id differs from the subject tenant');
    if (input.event_id === undefined && input.timestamp === undefined) {
      input.event_id = idFromSequence(message.info.stream, message.info.streamSequence);
      input.timestamp = new Date(Math.floor(Number(message.info.timestampNanos) / 1_000_000)).toISOString();
    }
    try {
      return parseEvent(input, this.options.window, systemClock.now());
    } catch (error) {
      if (error instanceof ValidationError) return reject('invalid event', error.details);
      throw error;
    }
  }
}

/** A stable UUID (version 8, RFC 9562 custom) for a stream message, so its redeliveries share one id. */
function idFromSequence(stream: string, sequence: number): string {
  const hash = createHash('sha256').update(`${stream}:${sequence}`).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x80;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
