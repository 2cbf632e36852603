import { createHash } from 'node:crypto';
import { jetstream, jetstreamManager, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { Msg } from '@nats-io/transport-node';
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

/**
 * What a batch keeps of a message until its write settles: the event, and the subjects its acknowledgement
 * goes to and its log lines name. Not the message itself: up to max_messages of them wait here at once, and
 * holding each one's objects and bytes until its batch commits made them outlive the young generation, the
 * drain's largest cost after NATS' own (BENCHMARKS.md, issue 49).
 */
interface DecodedMessage {
  readonly event: NewEvent;
  readonly subject: string;
  readonly reply: string;
}

// JetStream's acknowledgements (ADR-22), published to a message's reply subject as JsMsg.ack(), nak() and
// term() do; published here from the reply subject alone, for the reason above.
const ACK = Uint8Array.of(43, 65, 67, 75); // +ACK
const TERM = Uint8Array.of(43, 84, 69, 82, 77); // +TERM
const NAK_RETRY = new TextEncoder().encode(`-NAK ${JSON.stringify({ delay: RETRY_DELAY_MS * 1_000_000 })}`);

/**
 * Consumes `audit.ingest.<tenant_id>`: one event per message, micro-batched into single-statement writes.
 * A message is acknowledged only after its transaction committed, so a crash means redelivery, and
 * redelivery is harmless: a message without event_id and timestamp gets both derived from its stream
 * sequence and stored time, which makes the write idempotent.
 */
export class JetStreamIngest {
  private readonly options: JetStreamIngestOptions;
  private messages: ConsumerMessages | undefined;
  private readonly batcher: MicroBatcher<DecodedMessage>;
  private running: Promise<void> | undefined;

  constructor(options: JetStreamIngestOptions) {
    this.options = options;
    // Each batch is its own transaction and acknowledges its own messages, so batches may commit in any
    // order (writes are idempotent).
    this.batcher = new MicroBatcher({
      size: options.batchSize ?? 1000,
      lingerMs: options.lingerMs ?? 10,
      concurrency: CONCURRENT_WRITES,
      write: (batch) => this.store(batch),
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

  /**
   * Decodes each message as it arrives (one that can never be stored is terminated at once) and batches
   * its event. While every write slot is busy and a full batch waits, the next message is not taken.
   */
  private async consumeLoop(messages: ConsumerMessages): Promise<void> {
    for await (const message of messages) {
      let event: NewEvent | undefined;
      try {
        event = this.decode(message);
      } catch (error) {
        // A bug in the decoding, not in the message: left unacknowledged, it comes back after the ack wait.
        this.options.log.error({ err: error, subject: message.subject }, 'ingest message could not be decoded');
        continue;
      }
      if (event === undefined) continue;
      this.batcher.add({ event, subject: message.subject, reply: replyOf(message) });
      await this.batcher.room();
    }
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
      for (const { reply } of items) this.settle(reply, ACK);
    } catch (thrown) {
      const error = coerceError(thrown);
      if (isRefusedData(error)) {
        if (items.length === 1) return this.reject(items[0]!, 'refused by the event store', { sqlstate: sqlState(error) });
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
      for (const { reply } of items) this.settle(reply, NAK_RETRY);
    }
  }

  /**
   * Terminates a message that can never be stored, counted and logged by where it is and why, never by
   * its content (it may hold PHI; so may a Postgres error message, which is why only the SQLSTATE is kept).
   */
  private reject(message: { readonly subject: string; readonly reply: string }, reason: string, details?: unknown): undefined {
    this.options.log.warn(
      { subject: message.subject, stream_seq: streamSequenceOf(message.reply), reason, details },
      'ingest message rejected',
    );
    this.options.metrics.errors.inc({ kind: 'ingest_rejected' });
    // Plain +TERM: the NATS server here ignores a reason.
    this.settle(message.reply, TERM);
    return undefined;
  }

  private settle(reply: string, acknowledgement: Uint8Array): void {
    this.options.bus.nc.publish(reply, acknowledgement);
  }

  /** The event in a message, or undefined after terminating a message that can never be stored. */
  private decode(message: JsMsg): NewEvent | undefined {
    const reject = (reason: string, details?: unknown) =>
      this.reject({ subject: message.subject, reply: replyOf(message) }, reason, details);
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

/**
 * A message's reply subject, where its acknowledgement goes. JsMsg does not declare it; its implementation
 * keeps the core message, which does (test/ingestion/jetstream-ingest.test.ts fails should that change).
 */
function replyOf(message: JsMsg): string {
  return (message as JsMsg & { readonly msg: Msg }).msg.reply!;
}

/**
 * The stream sequence in a JetStream reply subject, read as JsMsg.info reads it (ADR-15):
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>…` from older servers, with `<domain>.<account hash>.`
 * after `ACK.` from newer ones.
 */
function streamSequenceOf(reply: string): number | undefined {
  const tokens = reply.split('.');
  const sequence = Number(tokens[tokens.length === 9 ? 5 : 7]);
  return Number.isSafeInteger(sequence) ? sequence : undefined;
}

/** A stable UUID (version 8, RFC 9562 custom) for a stream message, so its redeliveries share one id. */
function idFromSequence(stream: string, sequence: number): string {
  const hash = createHash('sha256').update(`${stream}:${sequence}`).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x80;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
