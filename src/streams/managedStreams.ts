import { randomBytes } from 'node:crypto';
import type { Database } from '../db/database.ts';
import { ValidationError } from '../platform/errors.ts';
import { parseInput } from '../platform/inputValidation.ts';
import type { SecretBox } from '../webhooks/secretBox.ts';
import type { TargetPolicy } from '../webhooks/targetGuard.ts';
import type { WebhookUrlPolicy } from '../webhooks/webhookRules.ts';
import { checkDestinationTarget, streamState, type StreamState } from './streamRegistry.ts';
import type { OcsfVersion } from './ocsf.ts';
import { destinationOf, sealDestination } from './streamSecrets.ts';
import {
  destinationSchema,
  normaliseFilter,
  startAtMs,
  startAtSchema,
  streamOcsfVersion,
  type DestinationInput,
  type StreamFilter,
  type StreamFormat,
} from './streamRules.ts';
import { deleteStream, findManagedStream, insertStreamWithinLimit, setPaused, updateStream, type LogStream } from './streamStore.ts';

/** What an AuditLogStream resource asks for, its credentials read from its Secret. */
export interface ManagedStreamSpec {
  /** Null: every tenant. */
  readonly tenantIds: readonly string[] | null;
  /** Validated here as the API validates a creation's destination (the secret members included). */
  readonly destination: unknown;
  /** For an `https` destination: the secret its batches are signed with. */
  readonly signingSecret: string | undefined;
  readonly format: StreamFormat;
  /** Absent: the stream's present release, or the default for a new ocsf stream. */
  readonly ocsfVersion: OcsfVersion | undefined;
  readonly filter: StreamFilter | undefined;
  readonly startAt: string | undefined;
  readonly treeHeads: boolean;
  readonly paused: boolean;
}

export interface AppliedStream {
  readonly stream: LogStream;
  readonly outcome: 'created' | 'updated' | 'unchanged';
}

export interface ManagedStreamsOptions {
  readonly db: Database;
  readonly secrets: SecretBox;
  readonly policy: WebhookUrlPolicy & TargetPolicy;
}

/**
 * Deployment-wide streams, declared by AuditLogStream resources and applied by the controller. No tenant
 * owns them (the public API does not show them), so their changes are recorded as Kubernetes Events rather
 * than in a tenant's trail. A spec is applied only when it differs from the stream — its destination and
 * secrets compared in the clear — because every change raises the stream's revision (its worker restarts)
 * and clears its failing state: the controller's periodic resync must not do either.
 */
export class ManagedStreams {
  private readonly options: ManagedStreamsOptions;

  constructor(options: ManagedStreamsOptions) {
    this.options = options;
  }

  find(managedBy: string): Promise<LogStream | undefined> {
    return findManagedStream(this.options.db, managedBy);
  }

  state(stream: LogStream): Promise<StreamState> {
    return streamState(this.options.db, stream);
  }

  /** Creates the resource's stream, or applies its spec to the existing one in place (positions kept). */
  async apply(managedBy: string, spec: ManagedStreamSpec): Promise<AppliedStream> {
    const { db, secrets, policy } = this.options;
    const destination = parseInput(destinationSchema(policy), spec.destination, 'destination');
    if (spec.startAt !== undefined) parseInput(startAtSchema, spec.startAt, 'startAt');
    const filter = normaliseFilter(spec.filter);
    const existing = await findManagedStream(db, managedBy);
    if (spec.format !== 'ocsf' && spec.ocsfVersion !== undefined)
      throw ValidationError.single('ocsfVersion', 'only an ocsf stream has an OCSF version');
    // An ocsf stream made before it could name a release keeps the one it has: its consumers parse that one.
    const ocsfVersion = streamOcsfVersion(spec.format, spec.ocsfVersion ?? existing?.ocsfVersion ?? undefined);
    if (existing && this.matches(existing, spec, destination, filter) && existing.ocsfVersion === ocsfVersion)
      return { stream: existing, outcome: 'unchanged' };
    await checkDestinationTarget(destination, policy);
    const { shown, ciphertext } = sealDestination(destination, secrets, spec.signingSecret);
    const stream = await db.transaction(async (client) => {
      if (existing) {
        return updateStream(client, existing.id, {
          tenantIds: spec.tenantIds,
          destination: shown,
          secretCiphertext: ciphertext,
          format: spec.format,
          ocsfVersion,
          filter,
          treeHeads: spec.treeHeads,
          paused: spec.paused,
        });
      }
      const created = (await insertStreamWithinLimit(
        client,
        {
          id: `str_${randomBytes(16).toString('hex')}`,
          ownerTenantId: null,
          tenantIds: spec.tenantIds,
          destinationType: destination.type,
          destination: shown,
          secretCiphertext: ciphertext,
          format: spec.format,
          ocsfVersion,
          filter,
          treeHeads: spec.treeHeads,
          startAtMs: startAtMs(spec.startAt),
          managedBy,
        },
        0,
      ))!;
      return spec.paused ? setPaused(client, created.id, true) : created;
    });
    return { stream, outcome: existing ? 'updated' : 'created' };
  }

  /** Removes the resource's stream and its positions; what it delivered stays where it went. */
  async delete(managedBy: string): Promise<LogStream | undefined> {
    const stream = await findManagedStream(this.options.db, managedBy);
    if (stream) await this.options.db.transaction((client) => deleteStream(client, stream.id));
    return stream;
  }

  /** Whether the stream already is what the spec asks for, secrets included. */
  private matches(stream: LogStream, spec: ManagedStreamSpec, destination: DestinationInput, filter: StreamFilter): boolean {
    let stored: ReturnType<typeof destinationOf>;
    try {
      stored = destinationOf(stream, this.options.secrets);
    } catch {
      // Sealed under another key: rewriting it under the current one is what makes it usable again.
      return false;
    }
    return (
      canonical(stored.destination) === canonical(destination) &&
      stored.signingSecret === spec.signingSecret &&
      canonical(stream.tenantIds) === canonical(spec.tenantIds) &&
      canonical(stream.filter) === canonical(filter) &&
      stream.format === spec.format &&
      stream.treeHeads === spec.treeHeads &&
      stream.paused === spec.paused
    );
  }
}

/** JSON with object keys sorted (jsonb stores them in its own order) and absent members left out. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, member: unknown) =>
    member && typeof member === 'object' && !Array.isArray(member)
      ? Object.fromEntries(
          Object.entries(member)
            .filter(([, item]) => item !== undefined)
            .sort(([a], [b]) => (a < b ? -1 : 1)),
        )
      : member,
  );
}
