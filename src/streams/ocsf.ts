import { SERVICE_VERSION } from '../platform/version.ts';

/**
 * The `ocsf` format of a log stream: each audit event as an event of one OCSF 1.3.0 class, chosen by the
 * kind of action (the table in docs/streams.md). The rules, in order:
 *
 * 1. an action whose last segment is a sign-in or sign-out verb (`auth.login`, `user.logout`) → Authentication;
 * 2. an access to protected health information (`phi.*`, or phi_involved) → Datastore Activity, the data access class;
 * 3. a change of a user account (resource type user, account or role) → Account Change, when its verb is one;
 * 4. any other administrative action (`admin.*`: keys, webhooks, streams) → Entity Management;
 * 5. everything else → API Activity.
 *
 * The served document is kept whole in `raw_data`, so a SIEM holds exactly what the API serves (and what
 * the tree head signs), and the fields OCSF has no place for go to `unmapped`. `metadata.sequence` is the
 * event's position in its tenant's trail, `metadata.uid` its event_id. Pure: no I/O.
 */

export const OCSF_VERSION = '1.3.0';

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

interface OcsfClass {
  readonly uid: number;
  readonly name: string;
  readonly categoryUid: number;
  readonly categoryName: string;
  /** activity_id by the action's verb (its last segment). */
  readonly activities: Readonly<Record<string, readonly [id: number, name: string]>>;
}

const IAM = { categoryUid: 3, categoryName: 'Identity & Access Management' };
const APPLICATION = { categoryUid: 6, categoryName: 'Application Activity' };

const AUTHENTICATION: OcsfClass = {
  uid: 3002,
  name: 'Authentication',
  ...IAM,
  activities: {
    login: [1, 'Logon'],
    logon: [1, 'Logon'],
    sign_in: [1, 'Logon'],
    signin: [1, 'Logon'],
    logout: [2, 'Logoff'],
    logoff: [2, 'Logoff'],
    sign_out: [2, 'Logoff'],
    signout: [2, 'Logoff'],
  },
};

const DATASTORE_ACTIVITY: OcsfClass = {
  uid: 6005,
  name: 'Datastore Activity',
  ...APPLICATION,
  activities: {
    read: [1, 'Read'],
    view: [1, 'Read'],
    get: [1, 'Read'],
    export: [1, 'Read'],
    download: [1, 'Read'],
    print: [1, 'Read'],
    update: [2, 'Update'],
    modify: [2, 'Update'],
    connect: [3, 'Connect'],
    query: [4, 'Query'],
    search: [4, 'Query'],
    write: [5, 'Write'],
    create: [6, 'Create'],
    delete: [7, 'Delete'],
    list: [8, 'List'],
    encrypt: [9, 'Encrypt'],
    decrypt: [10, 'Decrypt'],
  },
};

const ACCOUNT_CHANGE: OcsfClass = {
  uid: 3001,
  name: 'Account Change',
  ...IAM,
  activities: {
    create: [1, 'Create'],
    enable: [2, 'Enable'],
    password_change: [3, 'Password Change'],
    password_reset: [4, 'Password Reset'],
    disable: [5, 'Disable'],
    delete: [6, 'Delete'],
    attach_policy: [7, 'Attach Policy'],
    detach_policy: [8, 'Detach Policy'],
    lock: [9, 'Lock'],
    mfa_enable: [10, 'MFA Factor Enable'],
    mfa_disable: [11, 'MFA Factor Disable'],
  },
};

const ENTITY_MANAGEMENT: OcsfClass = {
  uid: 3004,
  name: 'Entity Management',
  ...IAM,
  activities: {
    create: [1, 'Create'],
    read: [2, 'Read'],
    update: [3, 'Update'],
    rotate_secret: [3, 'Update'],
    delete: [4, 'Delete'],
    enable: [8, 'Enable'],
    disable: [9, 'Disable'],
    revoke: [9, 'Disable'],
    auto_disable: [9, 'Disable'],
    activate: [10, 'Activate'],
    deactivate: [11, 'Deactivate'],
    pause: [12, 'Suspend'],
    suspend: [12, 'Suspend'],
    resume: [13, 'Resume'],
  },
};

const API_ACTIVITY: OcsfClass = {
  uid: 6003,
  name: 'API Activity',
  ...APPLICATION,
  activities: {
    create: [1, 'Create'],
    read: [2, 'Read'],
    get: [2, 'Read'],
    list: [2, 'Read'],
    export: [2, 'Read'],
    update: [3, 'Update'],
    delete: [4, 'Delete'],
  },
};

export const OCSF_CLASSES = [AUTHENTICATION, DATASTORE_ACTIVITY, ACCOUNT_CHANGE, ENTITY_MANAGEMENT, API_ACTIVITY] as const;

const ACCOUNT_RESOURCES = new Set(['user', 'account', 'role', 'service_account']);

/** The class an action maps to (the rules in this module's header). */
function ocsfClassOf(event: Pick<ServedEvent, 'action' | 'phi_involved' | 'resource_type'>): OcsfClass {
  const verb = verbOf(event.action);
  if (AUTHENTICATION.activities[verb]) return AUTHENTICATION;
  if (event.phi_involved || event.action.startsWith('phi.')) return DATASTORE_ACTIVITY;
  if (ACCOUNT_RESOURCES.has(event.resource_type) && ACCOUNT_CHANGE.activities[verb]) return ACCOUNT_CHANGE;
  if (event.action.startsWith('admin.')) return ENTITY_MANAGEMENT;
  return API_ACTIVITY;
}

function verbOf(action: string): string {
  return action.slice(action.lastIndexOf('.') + 1);
}

/** An OCSF event for one served event; `rawDocument` is its served JSON text, `leafIndex` its position in the trail. */
export function toOcsf(event: ServedEvent, rawDocument: string, leafIndex: number): Record<string, unknown> {
  const ocsfClass = ocsfClassOf(event);
  const [activityId, activityName] = ocsfClass.activities[verbOf(event.action)] ?? [99, 'Other'];
  const user = { uid: event.user_id, name: event.user_id };
  const record: Record<string, unknown> = {
    activity_id: activityId,
    activity_name: activityName,
    category_uid: ocsfClass.categoryUid,
    category_name: ocsfClass.categoryName,
    class_uid: ocsfClass.uid,
    class_name: ocsfClass.name,
    type_uid: ocsfClass.uid * 100 + activityId,
    type_name: `${ocsfClass.name}: ${activityName}`,
    severity_id: 1,
    severity: 'Informational',
    time: Date.parse(event.timestamp),
    status_id: event.success ? 1 : 2,
    status: event.success ? 'Success' : 'Failure',
    message: `${event.action} of ${event.resource_type} ${event.resource_id} by ${event.user_id}`,
    metadata: {
      version: OCSF_VERSION,
      product: { name: 'audit-trail', vendor_name: 'audit-trail', version: SERVICE_VERSION },
      uid: event.event_id,
      tenant_uid: event.tenant_id,
      sequence: leafIndex,
      original_time: event.timestamp,
      log_name: 'audit-trail',
      log_provider: 'audit-trail',
    },
    actor: { user },
    src_endpoint: event.source_ip === '' ? { name: 'unknown' } : { ip: event.source_ip },
    ...(event.user_agent === '' ? {} : { http_request: { user_agent: event.user_agent } }),
    ...classAttributes(ocsfClass, event),
    raw_data: rawDocument,
    unmapped: unmapped(ocsfClass, event),
  };
  return record;
}

/** The attributes each class requires or recommends, beyond the shared ones. */
function classAttributes(ocsfClass: OcsfClass, event: ServedEvent): Record<string, unknown> {
  switch (ocsfClass) {
    case AUTHENTICATION:
      return { user: { uid: event.user_id, name: event.user_id } };
    case DATASTORE_ACTIVITY:
      // The record acted on sits in a table named after its kind; its id goes to unmapped (OCSF 1.3 has no record object).
      return { type_id: 3, type: 'Table', table: { name: event.resource_type } };
    case ACCOUNT_CHANGE:
      return { user: { uid: event.resource_id, name: event.resource_id } };
    case ENTITY_MANAGEMENT:
      return { entity: { uid: event.resource_id, type: event.resource_type } };
    default:
      return {
        api: { operation: event.action, service: { name: 'audit-trail' } },
        resources: [{ uid: event.resource_id, type: event.resource_type }],
      };
  }
}

function unmapped(ocsfClass: OcsfClass, event: ServedEvent): Record<string, unknown> {
  return {
    user_role: event.user_role,
    ...(ocsfClass === DATASTORE_ACTIVITY ? { resource_id: event.resource_id } : {}),
    phi_involved: event.phi_involved,
    ...(event.fields_accessed === '' ? {} : { fields_accessed: JSON.parse(event.fields_accessed) as unknown }),
    ...(event.justification === '' ? {} : { justification: event.justification }),
    details: JSON.parse(event.details) as unknown,
  };
}
