import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';

const NANOS_PER_MS = 1_000_000;
const nanos = (ms: number) => ms * NANOS_PER_MS;

/**
 * Names of everything the service creates in JetStream, under an optional namespace so that several
 * deployments (or test files) can share one NATS without seeing each other's messages.
 */
export class BusNames {
  readonly subjectPrefix: string;
  readonly streamPrefix: string;

  constructor(namespace = '') {
    this.subjectPrefix = namespace === '' ? '' : `${namespace}.`;
    this.streamPrefix = namespace === '' ? '' : `${namespace.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}_`;
  }

  ingestSubject(tenantId: string): string {
    return `${this.subjectPrefix}audit.ingest.${tenantId}`;
  }

  deliverySubject(): string {
    return `${this.subjectPrefix}audit.deliveries`;
  }

  /** The tenant of an ingest subject, or undefined for any other subject. */
  tenantOfIngestSubject(subject: string): string | undefined {
    const prefix = `${this.subjectPrefix}audit.ingest.`;
    if (!subject.startsWith(prefix)) return undefined;
    const tenant = subject.slice(prefix.length);
    return tenant.length > 0 && !tenant.includes('.') ? tenant : undefined;
  }
}

export interface ConsumerDefinition {
  readonly stream: Partial<StreamConfig> & { name: string; subjects: string[] };
  readonly consumer: Partial<ConsumerConfig> & { durable_name: string };
}

/**
 * Producer events in: a work queue (each message consumed once, removed on ack), kept a week so that an
 * ingest outage loses nothing. Publishers may set Nats-Msg-Id for deduplication within two minutes.
 * Poison messages are terminated explicitly, so redelivery is unlimited.
 */
export function ingestConsumerDefinition(names: BusNames): ConsumerDefinition {
  return {
    stream: {
      name: `${names.streamPrefix}AUDIT_INGEST`,
      subjects: [`${names.subjectPrefix}audit.ingest.>`],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      max_age: nanos(7 * 24 * 3_600_000),
      duplicate_window: nanos(120_000),
    },
    consumer: {
      durable_name: 'audit-ingest',
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(30_000),
      max_deliver: -1,
      max_ack_pending: 5_000,
    },
  };
}

/** Creates the stream and durable consumer, or updates them to this definition. Idempotent. */
export async function ensureConsumer(jsm: JetStreamManager, definition: ConsumerDefinition): Promise<void> {
  try {
    await jsm.streams.info(definition.stream.name);
    await jsm.streams.update(definition.stream.name, definition.stream);
  } catch (error) {
    if (!isNotFound(error)) throw error;
    await jsm.streams.add(definition.stream);
  }
  try {
    await jsm.consumers.info(definition.stream.name, definition.consumer.durable_name);
    const { durable_name, deliver_policy, ...updatable } = definition.consumer;
    await jsm.consumers.update(definition.stream.name, durable_name, updatable);
  } catch (error) {
    if (!isNotFound(error)) throw error;
    await jsm.consumers.add(definition.stream.name, definition.consumer);
  }
}

function isNotFound(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.status === 404;
}

/**
 * Webhook deliveries out: a work queue on a single subject (NATS consumes a work queue spread over many
 * subjects several times slower). A message says "make attempt N of delivery D now"; Postgres holds the
 * schedule, so nothing waits in JetStream for a retry's delay: a nak with a delay would keep counting
 * against max_ack_pending, and a few hundred waiting retries would stop every new delivery. Redelivery is
 * unlimited because it only ever means a worker died or lost its connection mid-attempt.
 */
export function deliveryConsumerDefinition(names: BusNames, ackWaitMs: number): ConsumerDefinition {
  return {
    stream: {
      name: `${names.streamPrefix}AUDIT_DELIVERIES`,
      subjects: [names.deliverySubject()],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      max_age: nanos(7 * 24 * 3_600_000),
      // Nats-Msg-Id is "<delivery>.<attempt>.<publication>": a publish retried by the client is dropped.
      duplicate_window: nanos(2 * 60_000),
    },
    consumer: {
      durable_name: 'audit-delivery-workers',
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(ackWaitMs),
      max_deliver: -1,
      max_ack_pending: 20_000,
    },
  };
}
