import { SERVICE_VERSION } from '../platform/version.ts';
import {
  ACCOUNT_CHANGE,
  AUTHENTICATION,
  BASE_EVENT,
  DATASTORE_ACTIVITY,
  ENTITY_MANAGEMENT,
  type OcsfClass,
  ocsfClassOf,
  verbOf,
} from './ocsfClasses.ts';

/**
 * The `ocsf` format of a log stream: each audit event as an event of one OCSF class (ocsfClasses.ts), valid by
 * the schema of the stream's OCSF release (`ocsf_version`: 1.7.0 for new streams, 1.3.0 for those made
 * before it existed). The served document is kept whole in `raw_data`, so a SIEM holds exactly what the API
 * serves (and what the tree head signs), and the fields OCSF has no place for go to `unmapped`.
 * `metadata.sequence` is the event's position in its tenant's trail, `metadata.uid` its event_id. Nothing is
 * invented: an attribute the event has no value for is left out (and a class that would need it is not
 * chosen). Pure: no I/O.
 */

export const OCSF_VERSIONS = ['1.7.0', '1.3.0'] as const;
export type OcsfVersion = (typeof OCSF_VERSIONS)[number];
/** What a new `ocsf` stream emits unless it names another release. */
export const DEFAULT_OCSF_VERSION: OcsfVersion = '1.7.0';

/** The fields of a served event document the mapping reads. */
export interface ServedEvent {
  readonly event_id: string;
  readonly timestamp: string;
  readonly action: string;
  readonly user_id: string;
  readonly user_role: string;
  readonly resource_type: string;
  readonly resource_id: string;
  readonly fields_accessed: string;
  readonly phi_involved: boolean;
  readonly tenant_id: string;
  readonly source_ip: string;
  readonly user_agent: string;
  readonly justification: string;
  readonly success: boolean;
  readonly details: string;
}

/** An OCSF event for one served event; `rawDocument` is its served JSON text, `leafIndex` its position in the trail. */
export function toOcsf(event: ServedEvent, rawDocument: string, leafIndex: number, version: OcsfVersion): Record<string, unknown> {
  const ocsfClass = ocsfClassOf(event);
  const verb = verbOf(event.action);
  // A verb the class has no activity for is 99 Other, named by the verb itself, as OCSF asks.
  const [activityId, activityName] = ocsfClass.activities[verb] ?? [99, verb];
  const actor = actorOf(ocsfClass, event, version);
  const profiles = actor.profiles;
  return {
    activity_id: activityId,
    activity_name: activityName,
    category_uid: ocsfClass.categoryUid,
    category_name: ocsfClass.categoryName,
    class_uid: ocsfClass.uid,
    class_name: ocsfClass.name,
    type_uid: ocsfClass.uid * 100 + activityId,
    type_name: `${ocsfClass.name}: ${activityId === 99 ? 'Other' : activityName}`,
    severity_id: 1,
    severity: 'Informational',
    time: Date.parse(event.timestamp),
    status_id: event.success ? 1 : 2,
    status: event.success ? 'Success' : 'Failure',
    message: `${event.action} of ${event.resource_type} ${event.resource_id} by ${event.user_id}`,
    metadata: {
      version,
      product: { name: 'audit-trail', vendor_name: 'audit-trail', version: SERVICE_VERSION },
      ...(profiles.length > 0 ? { profiles } : {}),
      uid: event.event_id,
      tenant_uid: event.tenant_id,
      sequence: leafIndex,
      original_time: event.timestamp,
      log_name: 'audit-trail',
      log_provider: 'audit-trail',
    },
    ...actor.attributes,
    ...(event.source_ip === '' ? {} : { src_endpoint: { ip: event.source_ip } }),
    ...(event.user_agent === '' || ocsfClass === BASE_EVENT ? {} : { http_request: { user_agent: event.user_agent } }),
    ...classAttributes(ocsfClass, event),
    raw_data: rawDocument,
    unmapped: unmapped(ocsfClass, event, actor.attributes.actor === undefined),
  };
}

/**
 * `actor.user`, and the profiles it needs: in OCSF 1.3.0 the IAM classes have `actor` only through the `host`
 * profile, which the record then declares; in 1.7.0 it is their own. A Base Event has it only through `host`,
 * which 1.3.0's base event does not offer: there the user goes to `unmapped`.
 */
function actorOf(ocsfClass: OcsfClass, event: ServedEvent, version: OcsfVersion): { attributes: { actor?: unknown }; profiles: string[] } {
  const actor = { user: { uid: event.user_id, name: event.user_id } };
  if (ocsfClass === BASE_EVENT)
    return version === '1.3.0' ? { attributes: {}, profiles: [] } : { attributes: { actor }, profiles: ['host'] };
  const hostProfile = version === '1.3.0' && ocsfClass.categoryUid === 3;
  return { attributes: { actor }, profiles: hostProfile ? ['host'] : [] };
}

/** The attributes each class requires or recommends, beyond the shared ones. */
function classAttributes(ocsfClass: OcsfClass, event: ServedEvent): Record<string, unknown> {
  switch (ocsfClass) {
    case AUTHENTICATION:
      // The service signed in to is the tenant's application, the one that wrote the event: OCSF requires a
      // service or a destination endpoint, and the tenant is what the event says of it.
      return { user: { uid: event.user_id, name: event.user_id }, service: { uid: event.tenant_id } };
    case DATASTORE_ACTIVITY:
      // The record acted on sits in a table named after its kind; its id goes to unmapped (OCSF has no record object).
      return { type_id: 3, type: 'Table', table: { name: event.resource_type } };
    case ACCOUNT_CHANGE:
      return { user: { uid: event.resource_id, name: event.resource_id } };
    case ENTITY_MANAGEMENT:
      return { entity: { uid: event.resource_id, type: event.resource_type } };
    case BASE_EVENT:
      return {};
    default:
      return {
        api: { operation: event.action, service: { name: 'audit-trail' } },
        resources: [{ uid: event.resource_id, type: event.resource_type }],
      };
  }
}

function unmapped(ocsfClass: OcsfClass, event: ServedEvent, withoutActor: boolean): Record<string, unknown> {
  return {
    ...(withoutActor ? { user_id: event.user_id } : {}),
    user_role: event.user_role,
    ...(ocsfClass === DATASTORE_ACTIVITY || ocsfClass === BASE_EVENT
      ? { resource_type: event.resource_type, resource_id: event.resource_id }
      : {}),
    phi_involved: event.phi_involved,
    ...(event.fields_accessed === '' ? {} : { fields_accessed: JSON.parse(event.fields_accessed) as unknown }),
    ...(event.justification === '' ? {} : { justification: event.justification }),
    ...(ocsfClass === BASE_EVENT && event.user_agent !== '' ? { user_agent: event.user_agent } : {}),
    details: JSON.parse(event.details) as unknown,
  };
}

/**
 * The record of a test send (POST /audit/streams/{id}/test) of an `ocsf` stream: a Base Event (activity 99,
 * `stream.test`), so that even a test never puts anything but OCSF in front of its consumer. It has no
 * `raw_data` nor `metadata.sequence`: no part of the trail.
 */
export function ocsfTestRecord(streamId: string, tenantId: string, nowMs: number, version: OcsfVersion): Record<string, unknown> {
  return {
    activity_id: 99,
    activity_name: 'stream.test',
    category_uid: BASE_EVENT.categoryUid,
    category_name: BASE_EVENT.categoryName,
    class_uid: BASE_EVENT.uid,
    class_name: BASE_EVENT.name,
    type_uid: 99,
    type_name: `${BASE_EVENT.name}: Other`,
    severity_id: 1,
    severity: 'Informational',
    time: nowMs,
    message: `audit-trail log stream ${streamId} test`,
    metadata: {
      version,
      product: { name: 'audit-trail', vendor_name: 'audit-trail', version: SERVICE_VERSION },
      tenant_uid: tenantId,
      log_name: 'audit-trail',
      log_provider: 'audit-trail',
    },
    unmapped: { stream_test: { stream_id: streamId, tenant_id: tenantId, sent_at: new Date(nowMs).toISOString() } },
  };
}
