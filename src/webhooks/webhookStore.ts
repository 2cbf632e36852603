import { prepared, type Queryable } from '../db/database.ts';
import { PREVIOUS_SECRET_EXPIRY } from './endpointSecretsStore.ts';

/** webhook_endpoints as the domain sees it; the sealed secret stays in the store and delivery modules. */
export interface WebhookEndpoint {
  readonly id: string;
  readonly tenantId: string;
  readonly url: string;
  readonly eventFilter: readonly string[];
  readonly description: string;
  readonly active: boolean;
  readonly disabledReason: 'manual' | 'auto' | null;
  readonly consecutiveFailures: number;
  readonly lastDeliveryAt: Date | null;
  readonly managedBy: string | null;
  readonly createdAt: Date;
  readonly disabledAt: Date | null;
  /** Until when the secret replaced by the last rotation still signs; null when none does (or it has expired). */
  readonly previousSecretExpiresAt: Date | null;
}

interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  event_filter: string[];
  description: string;
  active: boolean;
  disabled_reason: 'manual' | 'auto' | null;
  consecutive_failures: number;
  last_delivery_at: Date | null;
  managed_by: string | null;
  created_at: Date;
  disabled_at: Date | null;
  previous_secret_expires_at: Date | null;
  [column: string]: unknown;
}

const COLUMNS = `id, tenant_id, url, event_filter, description, active, disabled_reason, consecutive_failures,
                 last_delivery_at, managed_by, created_at, disabled_at, ${PREVIOUS_SECRET_EXPIRY}`;

function toEndpoint(row: EndpointRow): WebhookEndpoint {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    url: row.url,
    eventFilter: row.event_filter,
    description: row.description,
    active: row.active,
    disabledReason: row.disabled_reason,
    consecutiveFailures: row.consecutive_failures,
    lastDeliveryAt: row.last_delivery_at,
    managedBy: row.managed_by,
    createdAt: row.created_at,
    disabledAt: row.disabled_at,
    previousSecretExpiresAt: row.previous_secret_expires_at,
  };
}

export interface NewWebhookEndpoint {
  readonly id: string;
  readonly tenantId: string;
  readonly url: string;
  readonly eventFilter: readonly string[];
  readonly description: string;
  readonly secretCiphertext: Buffer;
  readonly managedBy: string | null;
}

/**
 * The first lock of every transaction that changes a tenant's endpoints, held to its end. Changes of one
 * tenant's endpoints then run one at a time, and each takes its row locks in one order: without it a
 * deletion (which locks its row FOR UPDATE and then, for its admin event's fan-out, every other endpoint
 * FOR KEY SHARE) deadlocked against a deletion of another endpoint doing the same the other way round.
 * It also keeps two registrations from both taking a tenant's last place.
 */
export async function lockTenantEndpoints(db: Queryable, tenantId: string): Promise<void> {
  await db.query('SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7301))', [tenantId]);
}

/** Inserts unless the tenant already has `limit` endpoints; undefined then. Needs lockTenantEndpoints. */
export async function insertEndpointWithinLimit(
  db: Queryable,
  endpoint: NewWebhookEndpoint,
  limit: number,
): Promise<WebhookEndpoint | undefined> {
  const count = await db.query<{ count: string }>('SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1', [endpoint.tenantId]);
  if (Number(count.rows[0]!.count) >= limit) return undefined;
  const { rows } = await db.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (id, tenant_id, url, event_filter, description, secret_ciphertext, managed_by)
     VALUES ($1, $2, $3, $4::text[], $5, $6, $7)
     RETURNING ${COLUMNS}`,
    [
      endpoint.id,
      endpoint.tenantId,
      endpoint.url,
      endpoint.eventFilter,
      endpoint.description,
      endpoint.secretCiphertext,
      endpoint.managedBy,
    ],
  );
  return toEndpoint(rows[0]!);
}

export async function listEndpoints(db: Queryable, tenantId: string): Promise<WebhookEndpoint[]> {
  const { rows } = await db.query<EndpointRow>(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at, id`, [
    tenantId,
  ]);
  return rows.map(toEndpoint);
}

/** Any tenant's endpoint: callers decide what another tenant's id means (403 or 404). */
export async function findEndpoint(db: Queryable, id: string, options: { lock?: boolean } = {}): Promise<WebhookEndpoint | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${COLUMNS} FROM webhook_endpoints WHERE id = $1${options.lock ? ' FOR UPDATE' : ''}`,
    [id],
  );
  return rows[0] ? toEndpoint(rows[0]) : undefined;
}

/** The newest endpoint a Kubernetes WebhookEndpoint resource owns. */
export async function findManagedEndpoint(db: Queryable, managedBy: string): Promise<WebhookEndpoint | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${COLUMNS} FROM webhook_endpoints WHERE managed_by = $1 ORDER BY created_at DESC, id LIMIT 1`,
    [managedBy],
  );
  return rows[0] ? toEndpoint(rows[0]) : undefined;
}

/** Marks the endpoint inactive (its deliveries are the caller's: EndpointDeliveries). Returns the endpoint as it now is. */
export async function disableEndpoint(db: Queryable, id: string, reason: 'manual' | 'auto'): Promise<WebhookEndpoint> {
  const { rows } = await db.query<EndpointRow>(
    `UPDATE webhook_endpoints SET active = false, disabled_reason = $2, disabled_at = now()
     WHERE id = $1 AND active
     RETURNING ${COLUMNS}`,
    [id, reason],
  );
  return rows[0] ? toEndpoint(rows[0]) : (await findEndpoint(db, id))!;
}

/**
 * Deletes the endpoint (its deliveries are the caller's: EndpointDeliveries). Run in a transaction that
 * already holds the endpoint's row lock (webhookRegistry.lockOwned).
 */
export async function deleteEndpoint(db: Queryable, id: string): Promise<boolean> {
  const result = await db.query('DELETE FROM webhook_endpoints WHERE id = $1', [id]);
  return (result.rowCount ?? 0) > 0;
}

/**
 * SQL for fan-out (delivery/fanOut.ts): the active endpoints of the tenants in the text[] expression
 * `tenants`, with their filters. KEY SHARE, as a foreign key would take for every row: an endpoint being
 * deleted is waited for and then skipped, and one fanned out to is not deleted before the statement's
 * transaction commits (its deletion then removes what it wrote).
 */
export function activeEndpointsOf(tenants: string): string {
  return `SELECT id, tenant_id, event_filter FROM webhook_endpoints WHERE tenant_id = ANY(${tenants}) AND active FOR KEY SHARE`;
}

/**
 * The webhook filter rule (docs/webhooks.md) as an SQL condition: whether the action `action` matches the
 * text[] filter `filter`. An entry ending in a dot is a prefix (`phi.` matches every `phi.*` action), any
 * other entry matches that action and the actions below it (`phi.read` matches `phi.read.x`, never
 * `phi.reader`); `[]` matches all. Live fan-out and replays both match with it, so a replayed range selects
 * exactly the events live fan-out would have.
 */
export function eventFilterMatches(filter: string, action: string): string {
  return `(cardinality(${filter}) = 0
          OR EXISTS (SELECT 1 FROM unnest(${filter}) AS entry
                     WHERE ${action} = entry
                        OR starts_with(${action}, CASE WHEN right(entry, 1) = '.' THEN entry ELSE entry || '.' END)))`;
}

/**
 * The endpoint's filter and whether it is active, KEY SHARE-locked as activeEndpointsOf locks (for a
 * replay's chunk: a deletion waits for it, and a disable is seen by the next one); undefined once deleted.
 */
export async function shareEndpointForFanOut(db: Queryable, id: string): Promise<{ eventFilter: string[]; active: boolean } | undefined> {
  const { rows } = await db.query<{ event_filter: string[]; active: boolean }>(
    'SELECT event_filter, active FROM webhook_endpoints WHERE id = $1 FOR KEY SHARE',
    [id],
  );
  return rows[0] ? { eventFilter: rows[0].event_filter, active: rows[0].active } : undefined;
}

/** Workers LISTEN here: a rotation's notification (its payload the endpoint id) arrives when it commits. */
export const ENDPOINT_SECRETS_CHANNEL = 'audit_webhook_secrets';

/**
 * Makes `secret` the endpoint's signing secret and `previous` the one that keeps signing beside it until
 * `previousExpiresAt`. Whatever was previous before is overwritten: at most two secrets are ever valid.
 * Workers are notified, so that deliveries they loaded before sign with these (delivery/rotatedSecrets.ts).
 */
export async function rotateEndpointSecret(
  db: Queryable,
  id: string,
  secret: Buffer,
  previous: Buffer,
  previousExpiresAt: Date,
): Promise<WebhookEndpoint> {
  const { rows } = await db.query<EndpointRow>(
    `WITH rotated AS (
       UPDATE webhook_endpoints
       SET secret_ciphertext = $2, previous_secret_ciphertext = $3, previous_secret_expires_at = $4
       WHERE id = $1
       RETURNING ${COLUMNS}
     )
     SELECT rotated.*, pg_notify($5, $1) FROM rotated`,
    [id, secret, previous, previousExpiresAt, ENDPOINT_SECRETS_CHANNEL],
  );
  return toEndpoint(rows[0]!);
}

export interface EndpointChanges {
  readonly url?: string;
  readonly eventFilter?: readonly string[];
  readonly description?: string;
}

export async function updateEndpoint(db: Queryable, id: string, changes: EndpointChanges): Promise<WebhookEndpoint> {
  const { rows } = await db.query<EndpointRow>(
    `UPDATE webhook_endpoints
     SET url = COALESCE($2, url), event_filter = COALESCE($3::text[], event_filter), description = COALESCE($4, description)
     WHERE id = $1
     RETURNING ${COLUMNS}`,
    [id, changes.url ?? null, changes.eventFilter ?? null, changes.description ?? null],
  );
  return toEndpoint(rows[0]!);
}

/** An endpoint's failure count as the outcome recorder reads and writes it (delivery/deliveryStateMachine.ts). */
export interface EndpointCounts {
  readonly active: boolean;
  /** Failed deliveries in a row. */
  readonly consecutiveFailures: number;
  /** last_delivery_at: the last attempt's time, whatever its outcome. */
  readonly lastAttemptAt: Date | null;
}

/**
 * Locks the endpoints a batch of outcomes touches, in id order, before any of their deliveries, and reads
 * their counts (stable while the lock is held: every other write of them locks the row too). Disable and
 * delete lock the endpoint first and its deliveries second; taking locks in the same order here is what
 * keeps a worker's outcome write and an API call from deadlocking. Deleted endpoints are absent.
 */
export async function lockEndpoints(db: Queryable, endpointIds: readonly string[]): Promise<Map<string, EndpointCounts>> {
  if (endpointIds.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; active: boolean; consecutive_failures: number; last_delivery_at: Date | null }>(
    prepared(
      'SELECT id, active, consecutive_failures, last_delivery_at FROM webhook_endpoints WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE',
      [[...new Set(endpointIds)].sort()],
    ),
  );
  return new Map(
    rows.map((row) => [row.id, { active: row.active, consecutiveFailures: row.consecutive_failures, lastAttemptAt: row.last_delivery_at }]),
  );
}

/** Writes the counts the state machine arrived at for the endpoints a batch touched (locked by lockEndpoints). */
export async function saveEndpointCounts(db: Queryable, counts: ReadonlyMap<string, EndpointCounts>): Promise<void> {
  if (counts.size === 0) return;
  const entries = [...counts.entries()];
  await db.query(
    prepared(
      `UPDATE webhook_endpoints AS w
     SET consecutive_failures = t.failures, last_delivery_at = t.last_attempt_at
     FROM unnest($1::text[], $2::int[], $3::timestamptz[]) AS t(id, failures, last_attempt_at)
     WHERE w.id = t.id`,
      [
        entries.map(([id]) => id),
        entries.map(([, endpoint]) => endpoint.consecutiveFailures),
        entries.map(([, endpoint]) => endpoint.lastAttemptAt?.toISOString() ?? null),
      ],
    ),
  );
}
