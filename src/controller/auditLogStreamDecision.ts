import type { V1Secret } from '@kubernetes/client-node';
import type { AppliedStream, ManagedStreamSpec } from '../streams/managedStreams.ts';
import type { StreamState } from '../streams/streamRegistry.ts';
import type { LogStream } from '../streams/streamStore.ts';
import type { Health } from './conditions.ts';
import { STREAM_SECRET_KEYS, type AuditLogStreamSpec } from './streamResource.ts';
import { invalidSpec } from './webhookEndpointState.ts';

/**
 * What a reconcile of an AuditLogStream resource concludes, without I/O: auditLogStreamReconciler.ts reads
 * the resource's Secret and its stream's state and hands them in. A spec that names both every tenant and
 * some (or neither) is invalid; credentials come only from a Secret labelled for streams, with every member
 * the destination's type needs (an https signing secret no shorter than MIN_SIGNING_SECRET_LENGTH); status
 * and health follow the stream's state (failing: Stalled, with the destination's refusal).
 */

/**
 * The label a Secret needs before an AuditLogStream may read it: whoever may create a stream in a namespace
 * could otherwise name any Secret of it (a database password, another team's token) and have its value sent
 * to a URL of their choosing. Labelling is the Secret owner's consent (docs/streams.md).
 */
const STREAM_CREDENTIALS_LABEL = 'audittrail.dev/stream-credentials';

/** An https destination's signing secret: the API generates 64 hex; a declared one is no shorter than half that. */
const MIN_SIGNING_SECRET_LENGTH = 32;

export type StreamCredentials = { readonly values: Record<string, string> } | { readonly problem: Health };

/** Why the spec's tenants cannot be meant, if they cannot. */
export function tenantsProblem(spec: AuditLogStreamSpec): Health | undefined {
  // The CRD's rule says the same; a resource admitted before it, or by a server without CEL, must not mean "every tenant".
  if (Boolean(spec.allTenants) !== (spec.tenantIds !== undefined)) return undefined;
  return invalidSpec([{ field: 'spec.tenantIds', message: 'set either allTenants: true or tenantIds, not both' }]);
}

/** The destination's credentials from the Secret secretRef names (undefined: there is none): the members its type needs. */
export function streamCredentials(secret: V1Secret | undefined, spec: AuditLogStreamSpec, namespace: string): StreamCredentials {
  const name = spec.destination.secretRef.name;
  if (!secret) {
    return {
      problem: { state: 'Stalled', reason: 'SecretNotFound', message: `Secret ${name} does not exist in ${namespace}.` },
    };
  }
  // Nothing of a Secret not labelled for streams is read, and nothing written for the stream from it.
  if (secret.metadata?.labels?.[STREAM_CREDENTIALS_LABEL] !== 'true') {
    const message =
      `Secret ${name} is not labelled ${STREAM_CREDENTIALS_LABEL}: "true"; an AuditLogStream reads only Secrets labelled for it. ` +
      `Its owner consents with: kubectl label secret ${name} -n ${namespace} ${STREAM_CREDENTIALS_LABEL}=true`;
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

/** The Event that tells of a stream created or changed; none when the spec changed nothing. */
export function streamChangeEvent(
  stream: LogStream,
  outcome: AppliedStream['outcome'],
): { readonly reason: string; readonly message: string } | undefined {
  if (outcome === 'unchanged') return undefined;
  const [reason, what] = outcome === 'created' ? ['StreamCreated', 'created'] : ['StreamUpdated', 'updated in place'];
  return { reason, message: `Stream ${stream.id} ${what}.` };
}

/** What status shows of the stream (nothing while there is none). */
export function streamStatus(stream: LogStream | undefined, state: StreamState | undefined) {
  return {
    id: stream?.id,
    state: state && ({ active: 'Active', paused: 'Paused', failing: 'Failing' } as const)[state.status],
    tenants: stream ? (stream.tenantIds?.join(',') ?? '*') : undefined,
    lagEvents: state?.lagEvents,
    lastDeliveredAt: stream?.lastDeliveredAt?.toISOString(),
    lastError: stream?.lastError ?? undefined,
  };
}

export function streamHealth(stream: LogStream, status: 'active' | 'paused' | 'failing'): Health {
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
export function managedSpec(spec: AuditLogStreamSpec, credentials: Record<string, string>): ManagedStreamSpec {
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
