/**
 * The OCSF classes the `ocsf` stream format emits, and the rule that picks one for an event (docs/streams.md
 * "OCSF classes"), in order:
 *
 * 1. an action whose last segment is a sign-in or sign-out verb (`auth.login`, `user.logout`) → Authentication;
 * 2. an access to protected health information (`phi.*`, or phi_involved) → Datastore Activity;
 * 3. a change of a user account (resource type user, account, role or service_account) → Account Change,
 *    when its verb is one;
 * 4. any other administrative action (`admin.*`: keys, webhooks, streams) → Entity Management;
 * 5. everything else → API Activity.
 *
 * API Activity and Datastore Activity require the source of the activity (`src_endpoint`, one of its address,
 * name or id): an event of theirs without a source IP is a Base Event instead, rather than one with an
 * invented source. The activity ids are those of OCSF 1.3.0, which 1.7.0 keeps. Pure data.
 */

export interface OcsfClass {
  readonly uid: number;
  readonly name: string;
  readonly categoryUid: number;
  readonly categoryName: string;
  /** activity_id by the action's verb (its last segment); any other verb is 99 Other, named by the verb. */
  readonly activities: Readonly<Record<string, readonly [id: number, name: string]>>;
}

const IAM = { categoryUid: 3, categoryName: 'Identity & Access Management' };
const APPLICATION = { categoryUid: 6, categoryName: 'Application Activity' };

export const AUTHENTICATION: OcsfClass = {
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

export const DATASTORE_ACTIVITY: OcsfClass = {
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

export const ACCOUNT_CHANGE: OcsfClass = {
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

export const ENTITY_MANAGEMENT: OcsfClass = {
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

/** OCSF's generic event (class 0, category 0): activity 99 always, named by the verb. */
export const BASE_EVENT: OcsfClass = { uid: 0, name: 'Base Event', categoryUid: 0, categoryName: 'Uncategorized', activities: {} };

export const OCSF_CLASSES = [AUTHENTICATION, DATASTORE_ACTIVITY, ACCOUNT_CHANGE, ENTITY_MANAGEMENT, API_ACTIVITY, BASE_EVENT] as const;

const ACCOUNT_RESOURCES = new Set(['user', 'account', 'role', 'service_account']);
/** The classes whose events must name their source (`src_endpoint` is required). */
const SOURCE_REQUIRED = new Set<OcsfClass>([API_ACTIVITY, DATASTORE_ACTIVITY]);

/** The class an event maps to (the rules in this module's header). */
export function ocsfClassOf(event: { action: string; phi_involved: boolean; resource_type: string; source_ip: string }): OcsfClass {
  const verb = verbOf(event.action);
  const chosen = ((): OcsfClass => {
    if (AUTHENTICATION.activities[verb]) return AUTHENTICATION;
    if (event.phi_involved || event.action.startsWith('phi.')) return DATASTORE_ACTIVITY;
    if (ACCOUNT_RESOURCES.has(event.resource_type) && ACCOUNT_CHANGE.activities[verb]) return ACCOUNT_CHANGE;
    if (event.action.startsWith('admin.')) return ENTITY_MANAGEMENT;
    return API_ACTIVITY;
  })();
  return event.source_ip === '' && SOURCE_REQUIRED.has(chosen) ? BASE_EVENT : chosen;
}

export function verbOf(action: string): string {
  return action.slice(action.lastIndexOf('.') + 1);
}
