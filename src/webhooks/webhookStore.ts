import type { Queryable } from '../db/database.ts';
import { ENDPOINT_COLUMNS, toEndpoint, type EndpointRow, type EndpointSettings, type WebhookEndpoint } from './webhookEndpoint.ts';
import type { EndpointKind } from './webhookRules.ts';

/** Everything a registration or a change writes of an endpoint's configuration, sealed parts sealed. */
export interface EndpointConfiguration extends EndpointSettings {
  readonly url: string;
  readonly eventFilter: readonly string[];
  readonly description: string;
  /** The payload filter compiled (payloadFilter.compilePayloadFilter); null without one. */
  readonly payloadFilterPath: string | null;
  readonly headersCiphertext: Buffer | null;
  /** A new Ed25519 key pair to store; null keeps the stored one (a pair once made is kept, whichever schemes sign). */
  readonly ed25519: { readonly keyCiphertext: Buffer; readonly publicKey: Buffer } | null;
}

export interface NewWebhookEndpoint extends EndpointConfiguration {
  readonly id: string;
  readonly tenantId: string;
  readonly kind: EndpointKind;
  readonly secretCiphertext: Buffer;
  readonly managedBy: string | null;
}

/** The configuration columns in the order configurationValues gives them, from parameter `first` on. */
function configurationColumns(first: number): { names: string; parameters: string[] } {
  const casts = ['', '::text[]', '', '::jsonb', '::jsonpath', '::text[]', '', '', '::int[]', '', '', '::text[]', '', ''];
  return {
    names: `url, event_filter, description, payload_filter, payload_filter_path, header_names, headers_ciphertext, timeout_s,
            retry_schedule_s, rate_limit_per_s, ordered, signature_schemes, ed25519_key_ciphertext, ed25519_public_key`,
    parameters: casts.map((cast, index) => `$${first + index}${cast}`),
  };
}

function configurationValues(configuration: EndpointConfiguration): unknown[] {
  return [
    configuration.url,
    configuration.eventFilter,
    configuration.description,
    configuration.payloadFilter === null ? null : JSON.stringify(configuration.payloadFilter),
    configuration.payloadFilterPath,
    configuration.headerNames,
    configuration.headersCiphertext,
    configuration.timeoutS,
    configuration.retryScheduleS,
    configuration.rateLimitPerS,
    configuration.ordered,
    configuration.signatureSchemes,
    configuration.ed25519?.keyCiphertext ?? null,
    configuration.ed25519?.publicKey ?? null,
  ];
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
  const configuration = configurationColumns(6);
  const { rows } = await db.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (id, tenant_id, kind, secret_ciphertext, managed_by, ${configuration.names})
     VALUES ($1, $2, $3, $4, $5, ${configuration.parameters.join(', ')})
     RETURNING ${ENDPOINT_COLUMNS}`,
    [endpoint.id, endpoint.tenantId, endpoint.kind, endpoint.secretCiphertext, endpoint.managedBy, ...configurationValues(endpoint)],
  );
  return toEndpoint(rows[0]!);
}

export async function listEndpoints(db: Queryable, tenantId: string): Promise<WebhookEndpoint[]> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at, id`,
    [tenantId],
  );
  return rows.map(toEndpoint);
}

/** Any tenant's endpoint: callers decide what another tenant's id means (403 or 404). */
export async function findEndpoint(db: Queryable, id: string, options: { lock?: boolean } = {}): Promise<WebhookEndpoint | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1${options.lock ? ' FOR UPDATE' : ''}`,
    [id],
  );
  return rows[0] ? toEndpoint(rows[0]) : undefined;
}

/** The newest endpoint a Kubernetes WebhookEndpoint resource owns. */
export async function findManagedEndpoint(db: Queryable, managedBy: string): Promise<WebhookEndpoint | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE managed_by = $1 ORDER BY created_at DESC, id LIMIT 1`,
    [managedBy],
  );
  return rows[0] ? toEndpoint(rows[0]) : undefined;
}

/** Marks the endpoint inactive (its deliveries are the caller's: EndpointDeliveries). Returns the endpoint as it now is. */
export async function disableEndpoint(db: Queryable, id: string, reason: 'manual' | 'auto'): Promise<WebhookEndpoint> {
  const { rows } = await db.query<EndpointRow>(
    `UPDATE webhook_endpoints SET active = false, disabled_reason = $2, disabled_at = now()
     WHERE id = $1 AND active
     RETURNING ${ENDPOINT_COLUMNS}`,
    [id, reason],
  );
  return rows[0] ? toEndpoint(rows[0]) : (await findEndpoint(db, id))!;
}

/**
 * Makes the endpoint active again with a fresh failure count (docs/webhooks.md "Enabling again"). Returns the
 * endpoint as it now is.
 */
export async function enableEndpoint(db: Queryable, id: string): Promise<WebhookEndpoint> {
  const { rows } = await db.query<EndpointRow>(
    `UPDATE webhook_endpoints SET active = true, disabled_reason = NULL, disabled_at = NULL, consecutive_failures = 0
     WHERE id = $1 AND NOT active
     RETURNING ${ENDPOINT_COLUMNS}`,
    [id],
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

/** Workers LISTEN here: a rotation's notification (its payload the endpoint id) arrives when it commits. */
export const ENDPOINT_SECRETS_CHANNEL = 'audit_webhook_secrets';

/** A rotation's keys: the new ones, and those that keep signing beside them until `previousExpiresAt`. */
export interface RotatedKeys {
  readonly secret: Buffer;
  readonly previous: Buffer;
  readonly previousExpiresAt: Date;
  /** The endpoint's Ed25519 key pairs, when it has one: the new, and the replaced. */
  readonly ed25519: {
    readonly keyCiphertext: Buffer;
    readonly publicKey: Buffer;
    readonly previousKeyCiphertext: Buffer;
    readonly previousPublicKey: Buffer;
  } | null;
}

/**
 * Makes `keys.secret` (and the new Ed25519 key) the endpoint's signing keys and `keys.previous` (and the
 * replaced Ed25519 key) those that keep signing beside them until `previousExpiresAt`. Whatever was previous
 * before is overwritten: at most two keys of each scheme are ever valid. Workers are notified, so that
 * deliveries they loaded before sign with these (delivery/rotatedSecrets.ts).
 */
export async function rotateEndpointSecret(db: Queryable, id: string, keys: RotatedKeys): Promise<WebhookEndpoint> {
  const { rows } = await db.query<EndpointRow>(
    `WITH rotated AS (
       UPDATE webhook_endpoints
       SET secret_ciphertext = $2, previous_secret_ciphertext = $3, previous_secret_expires_at = $4,
           ed25519_key_ciphertext = COALESCE($6, ed25519_key_ciphertext), ed25519_public_key = COALESCE($7, ed25519_public_key),
           previous_ed25519_key_ciphertext = $8, previous_ed25519_public_key = $9
       WHERE id = $1
       RETURNING ${ENDPOINT_COLUMNS}
     )
     SELECT rotated.*, pg_notify($5, $1) FROM rotated`,
    [
      id,
      keys.secret,
      keys.previous,
      keys.previousExpiresAt,
      ENDPOINT_SECRETS_CHANNEL,
      keys.ed25519?.keyCiphertext ?? null,
      keys.ed25519?.publicKey ?? null,
      keys.ed25519?.previousKeyCiphertext ?? null,
      keys.ed25519?.previousPublicKey ?? null,
    ],
  );
  return toEndpoint(rows[0]!);
}

/**
 * Writes the endpoint's whole configuration (the registry merged a change into it under the row's lock).
 * Workers are notified as for a rotation: signing schemes and headers are read with the secrets.
 */
export async function updateEndpoint(db: Queryable, id: string, configuration: EndpointConfiguration): Promise<WebhookEndpoint> {
  const columns = configurationColumns(3);
  // A key pair once made is kept (configuration.ed25519 null: the stored one stays).
  const kept = new Set(['ed25519_key_ciphertext', 'ed25519_public_key']);
  const assignments = columns.names
    .split(',')
    .map((column, index) => {
      const name = column.trim();
      return kept.has(name) ? `${name} = COALESCE(${columns.parameters[index]}, ${name})` : `${name} = ${columns.parameters[index]}`;
    })
    .join(', ');
  const { rows } = await db.query<EndpointRow>(
    `WITH updated AS (
       UPDATE webhook_endpoints SET ${assignments}
       WHERE id = $1
       RETURNING ${ENDPOINT_COLUMNS}
     )
     SELECT updated.*, pg_notify($2, $1) FROM updated`,
    [id, ENDPOINT_SECRETS_CHANNEL, ...configurationValues(configuration)],
  );
  return toEndpoint(rows[0]!);
}
