import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Database, Queryable } from '../db/database.ts';
import { adminEvent, type Actor } from '../events/adminEvent.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import { NotFoundError, ValidationError } from '../platform/errors.ts';
import { parseInput } from '../platform/inputValidation.ts';
import { generateWebhookSecret, type SecretBox } from '../webhooks/secretBox.ts';
import { targetProblem, type TargetPolicy } from '../webhooks/targetGuard.ts';
import type { WebhookUrlPolicy } from '../webhooks/webhookRules.ts';
import { itemEncoderOf } from './destinations/itemEncoders.ts';
import { openDestination, type DestinationOptions } from './destinations/openDestination.ts';
import { singleBatch } from './batches.ts';
import { testRecord } from './records.ts';
import { streamLag } from './streamLag.ts';
import { destinationOf, sealDestination } from './streamSecrets.ts';
import {
  STREAMS_PER_TENANT,
  STREAM_ID_PATTERN,
  normaliseFilter,
  startAtMs,
  streamCreationSchema,
  streamOcsfVersion,
  type DestinationInput,
  type StreamCreation,
} from './streamRules.ts';
import {
  deleteStream,
  findStream,
  insertStreamWithinLimit,
  listTenantStreams,
  lockTenantStreams,
  setPaused,
  type LogStream,
} from './streamStore.ts';

export interface CreatedStream {
  readonly stream: LogStream;
  /** For an `https` stream: the signing secret, shown once. */
  readonly secret: string | undefined;
}

/** Where a stream stands, for the API, the CLI and the resource status. */
export interface StreamState {
  readonly stream: LogStream;
  readonly status: 'active' | 'paused' | 'failing';
  /** The next leaf to deliver in each tenant's trail; for a tenant's own stream, in its trail (null before the first round). */
  readonly positions: ReadonlyMap<string, number>;
  readonly lagEvents: number;
  readonly lagSeconds: number;
}

export interface TestSend {
  readonly success: boolean;
  readonly error: string | null;
  readonly durationMs: number;
}

export interface StreamRegistryOptions {
  readonly db: Database;
  readonly writer: EventWriter;
  readonly secrets: SecretBox;
  readonly policy: WebhookUrlPolicy & TargetPolicy;
  /** How a test send reaches the destination (the streams role's settings). */
  readonly destinations: DestinationOptions;
  /** What lag_seconds is measured against (the system clock unless a test moves time itself). */
  readonly clock?: Clock;
}

/**
 * A tenant's log streams through the public API (docs/streams.md): create, list, look up, pause, resume,
 * test, delete. Every change writes its `admin.stream.*` event to the tenant's trail in the same
 * transaction, and so is the stream's own first record when it starts "now". Another tenant's stream and
 * a deployment-wide stream (an AuditLogStream resource's, managedStreams.ts) are unknown here: 404.
 */
export class StreamRegistry {
  private readonly options: StreamRegistryOptions;
  private readonly creationSchema: ReturnType<typeof streamCreationSchema>;

  constructor(options: StreamRegistryOptions) {
    this.options = options;
    this.creationSchema = streamCreationSchema(options.policy);
  }

  async create(tenantId: string, input: unknown, actor: Actor): Promise<CreatedStream> {
    const creation = parseInput(this.creationSchema, input);
    await this.checkTarget(creation.destination);
    const secret = creation.destination.type === 'https' ? generateWebhookSecret() : undefined;
    const { shown, ciphertext } = sealDestination(creation.destination, this.options.secrets, secret);
    const stream = await this.options.writer.recordWith('internal', async (client) => {
      await lockTenantStreams(client, tenantId);
      const inserted = await insertStreamWithinLimit(client, this.newStream(tenantId, creation, shown, ciphertext), STREAMS_PER_TENANT);
      if (!inserted) throw ValidationError.single('destination', `the tenant already has ${STREAMS_PER_TENANT} streams; delete one first`);
      return { result: inserted, events: [streamEvent('admin.stream.create', inserted, tenantId, actor)] };
    });
    return { stream, secret };
  }

  private newStream(tenantId: string, creation: StreamCreation, shown: Record<string, unknown>, ciphertext: Buffer) {
    return {
      id: `str_${randomBytes(16).toString('hex')}`,
      ownerTenantId: tenantId,
      tenantIds: [tenantId],
      destinationType: creation.destination.type,
      destination: shown,
      secretCiphertext: ciphertext,
      format: creation.format,
      ocsfVersion: streamOcsfVersion(creation.format, creation.ocsf_version),
      filter: normaliseFilter(creation.filter),
      treeHeads: creation.tree_heads,
      startAtMs: startAtMs(creation.start_at),
      managedBy: null,
    };
  }

  list(tenantId: string): Promise<LogStream[]> {
    return listTenantStreams(this.options.db, tenantId);
  }

  async state(tenantId: string, id: string): Promise<StreamState> {
    return this.stateOf(await this.owned(this.options.db, tenantId, id));
  }

  /** Position and lag of one of the tenant's streams. */
  stateOf(stream: LogStream): Promise<StreamState> {
    return streamState(this.options.db, stream, this.options.clock);
  }

  pause(tenantId: string, id: string, actor: Actor): Promise<LogStream> {
    return this.change(tenantId, id, actor, true);
  }

  /** Resumes a paused stream, and makes a failing one try its destination at once. */
  resume(tenantId: string, id: string, actor: Actor): Promise<LogStream> {
    return this.change(tenantId, id, actor, false);
  }

  private change(tenantId: string, id: string, actor: Actor, paused: boolean): Promise<LogStream> {
    return this.options.writer.recordWith('internal', async (client) => {
      const stream = await this.owned(client, tenantId, id, true);
      if (stream.paused === paused && (paused || !stream.failingSince)) return { result: stream, events: [] };
      const changed = await setPaused(client, id, paused);
      return { result: changed, events: [streamEvent(paused ? 'admin.stream.pause' : 'admin.stream.resume', changed, tenantId, actor)] };
    });
  }

  async delete(tenantId: string, id: string, actor: Actor): Promise<void> {
    await this.options.writer.recordWith('internal', async (client) => {
      const stream = await this.owned(client, tenantId, id, true);
      await deleteStream(client, id);
      return { result: undefined, events: [streamEvent('admin.stream.delete', stream, tenantId, actor)] };
    });
  }

  /** One test record to the destination now; nothing stored, the stream's state unchanged. */
  async test(tenantId: string, id: string): Promise<TestSend> {
    const stream = await this.owned(this.options.db, tenantId, id);
    return sendTestRecord(stream, this.options.secrets, this.options.destinations);
  }

  private async owned(db: pg.PoolClient | Database, tenantId: string, id: string, lock = false): Promise<LogStream> {
    const notFound = () => new NotFoundError('No such log stream.');
    if (!STREAM_ID_PATTERN.test(id)) throw notFound();
    const stream = await findStream(db, id, { lock });
    if (!stream || stream.ownerTenantId !== tenantId) throw notFound();
    return stream;
  }

  private checkTarget(destination: DestinationInput): Promise<void> {
    return checkDestinationTarget(destination, this.options.policy);
  }
}

/** The SSRF guard of webhooks on a destination's URL (or S3 endpoint), at creation and at every change. */
export async function checkDestinationTarget(destination: DestinationInput, policy: TargetPolicy): Promise<void> {
  const url = destination.type === 's3' ? destination.endpoint : destination.url;
  if (url === undefined) return;
  const problem = await targetProblem(new URL(url), policy);
  const field = destination.type === 's3' ? 'destination.endpoint' : 'destination.url';
  if (problem) throw ValidationError.single(field, `${problem}; stream destinations must be public addresses`);
}

/**
 * Position and lag of any stream: the API's, the CLI's and the resource status's view. lag_seconds is the
 * age, by `clock`, of the oldest leaf the stream has yet to deliver.
 */
export async function streamState(db: Queryable, stream: LogStream, clock: Clock = systemClock): Promise<StreamState> {
  const { positions, events, oldestWaitingAt } = await streamLag(db, stream);
  const status = stream.paused ? 'paused' : stream.failingSince ? 'failing' : 'active';
  const lagSeconds = oldestWaitingAt === undefined ? 0 : Math.max(0, Math.round((clock.now() - oldestWaitingAt.getTime()) / 1000));
  return { stream, status, positions, lagEvents: events, lagSeconds };
}

/** Sends one test record to a stream's destination. */
async function sendTestRecord(stream: LogStream, box: SecretBox, options: DestinationOptions): Promise<TestSend> {
  const { destination, signingSecret } = destinationOf(stream, box);
  const target = openDestination(destination, signingSecret, options, stream.format);
  const started = performance.now();
  try {
    const record = testRecord(stream.id, stream.ownerTenantId ?? '', stream);
    const outcome = await target.send(
      singleBatch(
        itemEncoderOf(destination, stream.format),
        { streamId: stream.id, tenantId: stream.ownerTenantId ?? 'test', firstLeaf: 0, lastLeaf: 0 },
        record,
      ),
    );
    const durationMs = Math.round(performance.now() - started);
    return { success: outcome.kind === 'delivered', error: outcome.kind === 'delivered' ? null : outcome.reason, durationMs };
  } finally {
    await target.close();
  }
}

/** An `admin.stream.*` event; never a secret. */
function streamEvent(action: string, stream: LogStream, tenantId: string, actor: Actor) {
  return adminEvent({
    tenantId,
    action,
    actor,
    resourceType: 'log_stream',
    resourceId: stream.id,
    details: { destination: { type: stream.destinationType, ...stream.destination }, format: stream.format, filter: stream.filter },
  });
}
