import { PREVIOUS_SECRET_EXPIRY } from './endpointSecretsStore.ts';
import type { PayloadFilter } from './payloadFilter.ts';
import type { EndpointKind, SignatureScheme } from './webhookRules.ts';

/*
 * A webhook endpoint as the domain sees it, and the row of webhook_endpoints it is read from: the shapes kept
 * apart, one mapping between them. Its SQL is webhookStore.ts; its sealed secrets endpointSecretsStore.ts.
 */

/**
 * An endpoint's settings beyond url, filter and description (docs/webhooks.md "Delivery settings"): null is
 * the service's default. Header values are never here, only their names.
 */
export interface EndpointSettings {
  readonly payloadFilter: PayloadFilter | null;
  readonly headerNames: readonly string[];
  readonly timeoutS: number | null;
  readonly retryScheduleS: readonly number[] | null;
  readonly rateLimitPerS: number | null;
  readonly ordered: boolean;
  readonly signatureSchemes: readonly SignatureScheme[];
}

/** webhook_endpoints as the domain sees it; the sealed secrets stay in the store and delivery modules. */
export interface WebhookEndpoint extends EndpointSettings {
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
  readonly kind: EndpointKind;
  /** The Ed25519 public key (32 bytes) when the endpoint has one, and the replaced one while it still signs. */
  readonly publicKey: Buffer | null;
  readonly previousPublicKey: Buffer | null;
}

export interface EndpointRow {
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
  kind: EndpointKind;
  payload_filter: PayloadFilter | null;
  header_names: string[];
  timeout_s: number | null;
  retry_schedule_s: number[] | null;
  rate_limit_per_s: number | null;
  ordered: boolean;
  signature_schemes: SignatureScheme[];
  ed25519_public_key: Buffer | null;
  previous_ed25519_public_key: Buffer | null;
  [column: string]: unknown;
}

/** The columns toEndpoint reads, the replaced secret's expiry and public key only while it still signs. */
export const ENDPOINT_COLUMNS = `id, tenant_id, url, event_filter, description, active, disabled_reason, consecutive_failures,
                 last_delivery_at, managed_by, created_at, disabled_at, ${PREVIOUS_SECRET_EXPIRY}, kind, payload_filter,
                 header_names, timeout_s, retry_schedule_s, rate_limit_per_s, ordered, signature_schemes, ed25519_public_key,
                 CASE WHEN previous_secret_expires_at > now() THEN previous_ed25519_public_key END AS previous_ed25519_public_key`;

export function toEndpoint(row: EndpointRow): WebhookEndpoint {
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
    kind: row.kind,
    payloadFilter: row.payload_filter,
    headerNames: row.header_names,
    timeoutS: row.timeout_s,
    retryScheduleS: row.retry_schedule_s,
    rateLimitPerS: row.rate_limit_per_s,
    ordered: row.ordered,
    signatureSchemes: row.signature_schemes,
    publicKey: row.ed25519_public_key,
    previousPublicKey: row.previous_ed25519_public_key,
  };
}
