import { sleep } from '../platform/sleep.ts';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type JetStreamManager,
  type StreamConfig,
  type StreamInfo,
} from '@nats-io/jetstream';
import { ConfigError } from '../config/config.ts';
import { systemClock } from '../platform/clock.ts';

const NANOS_PER_MS = 1_000_000;
const nanos = (ms: number) => ms * NANOS_PER_MS;

/** Subject and stream-name prefixes of one namespace; none for the empty namespace. */
class Namespace {
  readonly subjectPrefix: string;
  readonly streamPrefix: string;

  constructor(namespace: string) {
    this.subjectPrefix = namespace === '' ? '' : `${namespace}.`;
    this.streamPrefix = namespace === '' ? '' : `${namespace.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}_`;
  }
}

/**
 * Names of everything the service creates in JetStream. A NATS_NAMESPACE prefixes all of them, so that
 * deployments (or test files) can share one NATS. Without one:
 * - the ingest stream keeps the names producers are told to publish to (`audit.ingest.<tenant>`,
 *   AUDIT_INGEST), so an upgrade strands no message; a second deployment that would share it is refused
 *   at start (ensureConsumer);
 * - the delivery work queue, which only the service itself sees, takes the deployment id as its namespace:
 *   two deployments with their own databases and default settings never take each other's deliveries.
 */
export class BusNames {
  /** The deployment (database) whose streams these are; they are stamped with it. */
  readonly deploymentId: string;
  private readonly ingest: Namespace;
  private readonly delivery: Namespace;

  constructor(options: { namespace: string; deploymentId: string }) {
    this.deploymentId = options.deploymentId;
    this.ingest = new Namespace(options.namespace);
    this.delivery = new Namespace(options.namespace === '' ? options.deploymentId : options.namespace);
  }

  ingestSubject(tenantId: string): string {
    return `${this.ingest.subjectPrefix}audit.ingest.${tenantId}`;
  }

  ingestStream(): string {
    return `${this.ingest.streamPrefix}AUDIT_INGEST`;
  }

  deliverySubject(): string {
    return `${this.delivery.subjectPrefix}audit.deliveries`;
  }

  deliveryStream(): string {
    return `${this.delivery.streamPrefix}AUDIT_DELIVERIES`;
  }

  /** The latest signed head of a tenant's tree (integrity/forkGuard.ts), one message per subject. */
  signedHeadSubject(tenantId: string): string {
    return `${this.delivery.subjectPrefix}audit.signed_heads.${tenantId}`;
  }

  signedHeadStream(): string {
    return `${this.delivery.streamPrefix}AUDIT_SIGNED_HEADS`;
  }

  /** Every stream the service may create under these names: what removing a deployment removes. */
  streams(): string[] {
    return [this.ingestStream(), this.deliveryStream(), this.signedHeadStream()];
  }

  /** The tenant of an ingest subject, or undefined for any other subject. */
  tenantOfIngestSubject(subject: string): string | undefined {
    const prefix = `${this.ingest.subjectPrefix}audit.ingest.`;
    if (!subject.startsWith(prefix)) return undefined;
    const tenant = subject.slice(prefix.length);
    return tenant.length > 0 && !tenant.includes('.') ? tenant : undefined;
  }
}

export interface ConsumerDefinition {
  readonly stream: Partial<StreamConfig> & { name: string; subjects: string[] };
  readonly consumer: Partial<ConsumerConfig> & { durable_name: string };
  /** The deployment that owns the stream: written into its description, checked before it is used. */
  readonly deploymentId: string;
}

/**
 * Stream descriptions carry the owning deployment, `audit-trail deployment <id>: …`. The description,
 * because NATS 2.9 has no stream metadata (2.10 added it; @nats-io/jetstream refuses to send it to 2.9).
 */
const OWNER_STAMP = /^audit-trail deployment ([a-z0-9]{12}):/;

function stamped(deploymentId: string, purpose: string): string {
  return `audit-trail deployment ${deploymentId}: ${purpose}`;
}

/** The deployment a stream description names, or undefined for a stream nobody stamped. */
function ownerOfStream(description: string | undefined): string | undefined {
  return description === undefined ? undefined : OWNER_STAMP.exec(description)?.[1];
}

/** A stream the service would use belongs to another deployment: this one needs a NATS_NAMESPACE of its own. */
class StreamOwnedElsewhereError extends ConfigError {
  override name = 'StreamOwnedElsewhereError';

  constructor(stream: string, owner: string, deploymentId: string) {
    super(
      'NATS_NAMESPACE',
      `JetStream stream ${stream} belongs to audit-trail deployment ${owner}, and this database is deployment ${deploymentId}; ` +
        'two deployments must not share it: give this one a NATS_NAMESPACE of its own (docs/operations.md, "Sharing a NATS")',
    );
  }
}

/**
 * Producer events in: a work queue (each message consumed once, removed on ack), kept a week so that an
 * ingest outage loses nothing. Publishers may set Nats-Msg-Id for deduplication within two minutes.
 * Poison messages are terminated explicitly, so redelivery is unlimited.
 */
export function ingestConsumerDefinition(names: BusNames, replicas = 1): ConsumerDefinition {
  return {
    deploymentId: names.deploymentId,
    stream: {
      name: names.ingestStream(),
      subjects: [names.ingestSubject('>')],
      description: stamped(names.deploymentId, 'producer events in (audit.ingest.<tenant>)'),
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      num_replicas: replicas,
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

/**
 * Creates the stream and durable consumer, or updates them to this definition. Idempotent. A stream stamped
 * by another deployment is refused (StreamOwnedElsewhereError) and left as it is; an unstamped one (created
 * by a version before the stamp) is adopted: the update writes this deployment's stamp. A changed
 * num_replicas is applied by the update: JetStream adds or removes the stream's copies in place, and the
 * consumer follows its stream.
 */
export async function ensureConsumer(jsm: JetStreamManager, definition: ConsumerDefinition): Promise<void> {
  const { name } = definition.stream;
  let existing: StreamInfo | undefined;
  try {
    existing = await jsm.streams.info(name);
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  if (existing === undefined) {
    await jsm.streams.add(definition.stream);
  } else {
    const owner = ownerOfStream(existing.config.description);
    if (owner !== undefined && owner !== definition.deploymentId) throw new StreamOwnedElsewhereError(name, owner, definition.deploymentId);
    await jsm.streams.update(name, definition.stream);
    const replicas = definition.stream.num_replicas ?? 1;
    if ((existing.config.num_replicas || 1) !== replicas) await settledReplicas(jsm, name, replicas);
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

const REPLICA_CHANGE_TIMEOUT_MS = 60_000;

/**
 * Waits until a stream whose replica count just changed has its new copies in place and a leader: until
 * then its consumer is being moved too, and requests about it time out.
 */
async function settledReplicas(jsm: JetStreamManager, name: string, replicas: number): Promise<void> {
  const deadline = systemClock.now() + REPLICA_CHANGE_TIMEOUT_MS;
  for (;;) {
    const { cluster } = await jsm.streams.info(name).catch(() => ({ cluster: undefined }));
    const peers = cluster?.replicas ?? [];
    if (cluster?.leader !== undefined && peers.length === replicas - 1 && peers.every((peer) => peer.current)) return;
    if (systemClock.now() > deadline)
      throw new Error(`JetStream stream ${name} did not reach ${replicas} replicas within ${REPLICA_CHANGE_TIMEOUT_MS / 1000} s`);
    await sleep(250);
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
export function deliveryConsumerDefinition(names: BusNames, ackWaitMs: number, replicas = 1): ConsumerDefinition {
  return {
    deploymentId: names.deploymentId,
    stream: {
      name: names.deliveryStream(),
      subjects: [names.deliverySubject()],
      description: stamped(names.deploymentId, 'webhook delivery work queue'),
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      num_replicas: replicas,
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
