import type { Queryable } from '../db/database.ts';

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
  [column: string]: unknown;
}

const COLUMNS = `id, tenant_id, url, event_filter, description, active, disabled_reason, consecutive_failures,
                 last_delivery_at, managed_by, created_at, disabled_at`;

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
export async function insertEndpointWithinLimit(db: Queryable, endpoint: NewWebhookEndpoint, limit: number): Promise<WebhookEndpoint | undefined> {
  const count = await db.query<{ count: string }>('SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1', [endpoint.tenantId]);
  if (Number(count.rows[0]!.count) >= limit) return undefined;
  const { rows } = await db.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (id, tenant_id, url, event_filter, description, secret_ciphertext, managed_by)
     VALUES ($1, $2, $3, $4::text[], $5, $6, $7)
     RETURNING ${COLUMNS}`,
    [endpoint.id, endpoint.tenantId, endpoint.url, endpoint.eventFilter, endpoint.description, endpoint.secretCiphertext, endpoint.managedBy],
  );
  return toEndpoint(rows[0]!);
}

export async function listEndpoints(db: Queryable, tenantId: string): Promise<WebhookEndpoint[]> {
  const { rows } = await db.query<EndpointRow>(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at, id`, [tenantId]);
  return rows.map(toEndpoint);
}

/** Any tenant's endpoint: callers decide what another tenant's id means (403 or 404). */
export async function findEndpoint(db: Queryable, id: string, options: { lock?: boolean } = {}): Promise<WebhookEndpoint | undefined> {
  const { rows } = await db.query<EndpointRow>(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE id = $1${options.lock ? ' FOR UPDATE' : ''}`, [id]);
  return rows[0] ? toEndpoint(rows[0]) : undefined;
}

/** The newest endpoint a Kubernetes WebhookEndpoint resource owns. */
export async function findManagedEndpoint(db: Queryable, managedBy: string): Promise<WebhookEndpoint | undefined> {
  const { rows } = await db.query<EndpointRow>(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE managed_by = $1 ORDER BY created_at DESC, id LIMIT 1`, [managedBy]);
  return rows[0] ? toEndpoint(rows[0]) : undefined;
}

/**
 * Marks the endpoint inactive and cancels its pending deliveries, retries included, so nothing more is
 * attempted (SPEC.md: "new deliveries stop"). Returns the endpoint as it now is.
 */
export async function disableEndpoint(db: Queryable, id: string, reason: 'manual' | 'auto'): Promise<WebhookEndpoint> {
  const { rows } = await db.query<EndpointRow>(
    `UPDATE webhook_endpoints SET active = false, disabled_reason = $2, disabled_at = now()
     WHERE id = $1 AND active
     RETURNING ${COLUMNS}`,
    [id, reason],
  );
  await db.query(
    `UPDATE deliveries SET state = 'cancelled', completed_at = now() WHERE endpoint_id = $1 AND state = 'pending'`,
    [id],
  );
  return rows[0] ? toEndpoint(rows[0]) : (await findEndpoint(db, id))!;
}

/**
 * Deletes the endpoint, its deliveries and their attempts. Run in a transaction that already holds the
 * endpoint's row lock (webhookRegistry.lockOwned): a fan-out that had locked the endpoint has committed
 * by then and a later one waits and skips it, and each statement below reads afresh, so no delivery
 * written meanwhile is left behind.
 */
export async function deleteEndpoint(db: Queryable, id: string): Promise<boolean> {
  const result = await db.query('DELETE FROM webhook_endpoints WHERE id = $1', [id]);
  await db.query('DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE endpoint_id = $1)', [id]);
  await db.query('DELETE FROM deliveries WHERE endpoint_id = $1', [id]);
  return (result.rowCount ?? 0) > 0;
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
