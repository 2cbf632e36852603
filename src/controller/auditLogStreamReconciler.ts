import { ValidationError } from '../platform/errors.ts';
import { checkInput } from '../platform/inputValidation.ts';
import type { ManagedStreamSpec, ManagedStreams } from '../streams/managedStreams.ts';
import type { LogStream } from '../streams/streamStore.ts';
import type { Health } from './conditions.ts';
import type { DeploymentGuard } from './deploymentGuard.ts';
import { reportHealth } from './healthReport.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { involvedObject, managedByOf, type CustomResource, type KubeResources } from './kubeResources.ts';
import { AUDIT_LOG_STREAM, STREAM_SECRET_KEYS, auditLogStreamSpecSchema, type AuditLogStreamSpec } from './streamResource.ts';
import { invalidSpec } from './webhookEndpointState.ts';

/** Holds deletion of an AuditLogStream until its stream (and its positions) is deleted. */
const STREAM_FINALIZER = 'audittrail.dev/delete-stream';

/**
 * The label a Secret needs before an AuditLogStream may read it: whoever may create a stream in a namespace
 * could otherwise name any Secret of it (a database password, another team's token) and have its value sent
 * to a URL of their choosing. Labelling is the Secret owner's consent (docs/streams.md).
 */
const STREAM_CREDENTIALS_LABEL = 'audittrail.dev/stream-credentials';

/** An https destination's signing secret: the API generates 64 hex; a declared one is no shorter than half that. */
const MIN_SIGNING_SECRET_LENGTH = 32;

type Status = {
  id?: string;
  state?: 'Active' | 'Paused' | 'Failing';
  tenants?: string;
  lagEvents?: number;
  lastDeliveredAt?: string;
  lastError?: string;
};
export type AuditLogStreamObject = CustomResource<AuditLogStreamSpec, Status>;

export interface AuditLogStreamReconcilerOptions {
  readonly resources: KubeResources;
  readonly streams: ManagedStreams;
  readonly events: EventRecorder;
  readonly guard: DeploymentGuard;
}

/**
 * Brings one AuditLogStream resource and its deployment-wide stream together: creates the stream with the
 * credentials of the Secret the resource names (validated, and its URL checked by the SSRF guard, as the
 * public API does), applies spec and Secret changes in place (the stream keeps its positions), reports
 * the stream's state in status at every resync (a destination refusing its batches makes the resource
 * Stalled, with a Warning Event, until it accepts again), and deletes the stream when the resource goes.
 * The streams role delivers it; this only declares it.
 */
export class AuditLogStreamReconciler {
  private readonly options: AuditLogStreamReconcilerOptions;

  constructor(options: AuditLogStreamReconcilerOptions) {
    this.options = options;
  }

  async reconcile(informed: AuditLogStreamObject): Promise<void> {
    const { resources, streams, guard, events } = this.options;
    const cached = resources.freshest(informed);
    if (!(await guard.mayAct(cached))) return;
    const managedBy = managedByOf(cached);
    if (cached.metadata.deletionTimestamp) return this.finalize(cached, managedBy);
    const object = await guard.claim(AUDIT_LOG_STREAM.plural, cached, STREAM_FINALIZER);

    const existing = await streams.find(managedBy);
    const parsed = checkInput(auditLogStreamSpecSchema, object.spec, 'spec');
    if (!parsed.success) return this.report(object, existing, invalidSpec(parsed.error.details));
    // The CRD's rule says the same; a resource admitted before it, or by a server without CEL, must not mean "every tenant".
    if (Boolean(parsed.data.allTenants) === (parsed.data.tenantIds !== undefined)) {
      const details = [{ field: 'spec.tenantIds', message: 'set either allTenants: true or tenantIds, not both' }];
      return this.report(object, existing, invalidSpec(details));
    }
    const credentials = await this.credentials(object, parsed.data);
    // Until the Secret is right, an existing stream goes on with the credentials it has.
    if ('problem' in credentials) return this.report(object, existing, credentials.problem);
    try {
      const { stream, outcome } = await streams.apply(managedBy, managedSpec(parsed.data, credentials.values));
      if (outcome !== 'unchanged') {
        const [reason, what] = outcome === 'created' ? ['StreamCreated', 'created'] : ['StreamUpdated', 'updated in place'];
        await events.record(involvedObject(object), 'Normal', reason, `Stream ${stream.id} ${what}.`);
      }
      return this.report(object, stream);
    } catch (error) {
      if (error instanceof ValidationError) return this.report(object, existing, invalidSpec(error.details));
      throw error;
    }
  }

  private async finalize(cached: AuditLogStreamObject, managedBy: string): Promise<void> {
    if (!cached.metadata.finalizers?.includes(STREAM_FINALIZER)) return;
    const deleted = await this.options.streams.delete(managedBy);
    if (deleted) await this.options.events.record(involvedObject(cached), 'Normal', 'StreamDeleted', `Stream ${deleted.id} deleted.`);
    await this.options.resources.removeFinalizer(AUDIT_LOG_STREAM.plural, cached, STREAM_FINALIZER);
  }

  /** The destination's credentials from the Secret secretRef names: the members its type needs. */
  private async credentials(
    object: AuditLogStreamObject,
    spec: AuditLogStreamSpec,
  ): Promise<{ values: Record<string, string> } | { problem: Health }> {
    const name = spec.destination.secretRef.name;
    const secret = await this.options.resources.readSecret(object.metadata.namespace, name);
    if (!secret) {
      return {
        problem: { state: 'Stalled', reason: 'SecretNotFound', message: `Secret ${name} does not exist in ${object.metadata.namespace}.` },
      };
    }
    // Nothing of a Secret not labelled for streams is read, and nothing written for the stream from it.
    if (secret.metadata?.labels?.[STREAM_CREDENTIALS_LABEL] !== 'true') {
      const message =
        `Secret ${name} is not labelled ${STREAM_CREDENTIALS_LABEL}: "true"; an AuditLogStream reads only Secrets labelled for it. ` +
        `Its owner consents with: kubectl label secret ${name} -n ${object.metadata.namespace} ${STREAM_CREDENTIALS_LABEL}=true`;
      return { problem: { state: 'Stalled', reason: 'SecretNotLabelled', message } };
    }
    const needed = STREAM_SECRET_KEYS[spec.destination.type];
    const values: Record<string, string> = {};
    for (const key of needed) {
      const value = secret.data?.[key];
      if (value !== undefined) values[key] = Buffer.from(value, 'base64').toString('utf8');
    }
    const missing = needed.filter((key) => !values[key]);
    if (values.signingSecret !== undefined && values.signingSecret.length < MIN_SIGNING_SECRET_LENGTH) {
      const message = `Secret ${name}: signingSecret must be at least ${MIN_SIGNING_SECRET_LENGTH} characters (e.g. openssl rand -hex 32).`;
      return { problem: { state: 'Stalled', reason: 'SecretKeyInvalid', message } };
    }
    if (missing.length > 0) {
      return {
        problem: {
          state: 'Stalled',
          reason: 'SecretKeyMissing',
          message: `Secret ${name} has no ${missing.join(' or ')}, which a ${spec.destination.type} destination needs.`,
        },
      };
    }
    return { values };
  }

  /** Status from the stream's state, and the health that follows from it unless `problem` says otherwise. */
  private async report(object: AuditLogStreamObject, stream: LogStream | undefined, problem?: Health): Promise<void> {
    const state = stream && (await this.options.streams.state(stream));
    const fields = {
      id: stream?.id,
      state: state && ({ active: 'Active', paused: 'Paused', failing: 'Failing' } as const)[state.status],
      tenants: stream ? (stream.tenantIds?.join(',') ?? '*') : undefined,
      lagEvents: state?.lagEvents,
      lastDeliveredAt: stream?.lastDeliveredAt?.toISOString(),
      lastError: stream?.lastError ?? undefined,
    };
    const health: Health = problem ?? streamHealth(stream!, state!.status);
    return reportHealth(this.options.resources, this.options.events, AUDIT_LOG_STREAM.plural, object, fields, health);
  }
}

function streamHealth(stream: LogStream, status: 'active' | 'paused' | 'failing'): Health {
  if (status === 'paused')
    return { state: 'Ready', reason: 'Paused', message: `Stream ${stream.id} is paused (spec.paused); its position is kept.` };
  if (status === 'failing') {
    return {
      state: 'Stalled',
      reason: 'DestinationRefused',
      message: `Stream ${stream.id}: the destination refused a batch (${stream.lastError ?? 'no answer recorded'}). It is tried again every minute and goes on from where it stopped once it accepts.`,
    };
  }
  return { state: 'Ready', reason: 'Active', message: `Stream ${stream.id} delivers to its ${stream.destinationType} destination.` };
}

/** The resource's spec in the public API's terms, the Secret's credentials in their members. */
function managedSpec(spec: AuditLogStreamSpec, credentials: Record<string, string>): ManagedStreamSpec {
  // The members are the API's in camelCase: two of them are spelt differently, the secret's reference is the resource's own.
  const { type, secretRef: _secretRef, forcePathStyle, routingKey, ...same } = spec.destination;
  const secrets = {
    splunk_hec: { token: credentials.token },
    datadog: { api_key: credentials.apiKey },
    https: {},
    s3: { access_key_id: credentials.accessKeyId, secret_access_key: credentials.secretAccessKey },
    amqp: { password: credentials.password },
  }[type];
  const members = { ...same, force_path_style: forcePathStyle, routing_key: routingKey };
  // Members of another type are passed on, so that the API's rules refuse them by name.
  const destination = { type, ...Object.fromEntries(Object.entries(members).filter(([, value]) => value !== undefined)), ...secrets };
  const filter = spec.filter && {
    ...(spec.filter.actionPrefixes ? { action_prefixes: spec.filter.actionPrefixes } : {}),
    ...(spec.filter.phiInvolved !== undefined ? { phi_involved: spec.filter.phiInvolved } : {}),
  };
  return {
    tenantIds: spec.allTenants ? null : (spec.tenantIds ?? null),
    destination,
    signingSecret: type === 'https' ? credentials.signingSecret : undefined,
    format: spec.format ?? 'native',
    ocsfVersion: spec.ocsfVersion,
    filter,
    startAt: spec.startAt,
    treeHeads: spec.treeHeads ?? true,
    paused: spec.paused ?? false,
  };
}
