import { ValidationError } from '../platform/errors.ts';
import { checkInput } from '../platform/inputValidation.ts';
import type { ManagedStreams } from '../streams/managedStreams.ts';
import type { LogStream } from '../streams/streamStore.ts';
import type { Health } from './conditions.ts';
import type { DeploymentGuard } from './deploymentGuard.ts';
import { reportHealth } from './healthReport.ts';
import type { EventRecorder } from './kubeEvents.ts';
import { involvedObject, managedByOf, type CustomResource, type KubeResources } from './kubeResources.ts';
import {
  managedSpec,
  streamChangeEvent,
  streamCredentials,
  streamHealth,
  streamStatus,
  tenantsProblem,
  type StreamCredentials,
} from './auditLogStreamDecision.ts';
import { AUDIT_LOG_STREAM, auditLogStreamSpecSchema, type AuditLogStreamSpec } from './streamResource.ts';
import { invalidSpec } from './webhookEndpointState.ts';

/** Holds deletion of an AuditLogStream until its stream (and its positions) is deleted. */
const STREAM_FINALIZER = 'audittrail.dev/delete-stream';

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
    const tenants = tenantsProblem(parsed.data);
    if (tenants) return this.report(object, existing, tenants);
    const credentials = await this.credentials(object, parsed.data);
    // Until the Secret is right, an existing stream goes on with the credentials it has.
    if ('problem' in credentials) return this.report(object, existing, credentials.problem);
    try {
      const { stream, outcome } = await streams.apply(managedBy, managedSpec(parsed.data, credentials.values));
      const told = streamChangeEvent(stream, outcome);
      if (told) await events.record(involvedObject(object), 'Normal', told.reason, told.message);
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

  /** The destination's credentials from the Secret secretRef names, or why they cannot be used. */
  private async credentials(object: AuditLogStreamObject, spec: AuditLogStreamSpec): Promise<StreamCredentials> {
    const secret = await this.options.resources.readSecret(object.metadata.namespace, spec.destination.secretRef.name);
    return streamCredentials(secret, spec, object.metadata.namespace);
  }

  /** Status from the stream's state, and the health that follows from it unless `problem` says otherwise. */
  private async report(object: AuditLogStreamObject, stream: LogStream | undefined, problem?: Health): Promise<void> {
    const state = stream && (await this.options.streams.state(stream));
    const fields = streamStatus(stream, state);
    const health: Health = problem ?? streamHealth(stream!, state!.status);
    return reportHealth(this.options.resources, this.options.events, AUDIT_LOG_STREAM.plural, object, fields, health);
  }
}
