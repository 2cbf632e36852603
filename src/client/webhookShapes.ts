/**
 * The shapes of webhook endpoints, their deliveries and replays in the public API (docs/webhooks.md): what
 * AuditTrailClient's webhook methods send and return. Types only.
 */

/** A scalar a payload filter compares with. */
export type PayloadFilterValue = string | number | boolean | null;

/**
 * Conditions on the delivery body an event must meet (docs/webhooks.md "Payload filters"). `path` is `type`,
 * `actor.user_id`, `actor.user_role`, `resource.type`, `resource.id`, `phi_involved`, `success` or
 * `details.<key>[.<key>…]`.
 */
export type PayloadFilter =
  | { path: string; equals: PayloadFilterValue }
  | { path: string; in: PayloadFilterValue[] }
  | { path: string; prefix: string }
  | { path: string; exists: boolean }
  | { all: PayloadFilter[] }
  | { any: PayloadFilter[] };

/** The signatures deliveries carry: `hmac` (v1) and `ed25519` (v1a). */
export type SignatureScheme = 'hmac' | 'ed25519';

/** An endpoint's settings; null is the service's default. */
export interface WebhookSettings {
  payload_filter: PayloadFilter | null;
  /** Seconds a receiver has to answer, 1 to 30 (default 10). */
  timeout_s: number | null;
  /** Seconds between attempts, up to 7 delays (default 60, 300, 1800, 7200). */
  retry_schedule_s: number[] | null;
  /** Deliveries per second at most, 1 to 1000 (default: no limit). */
  rate_limit_per_s: number | null;
  ordered: boolean;
  signature_schemes: SignatureScheme[];
}

export interface WebhookEndpoint extends WebhookSettings {
  id: string;
  url: string;
  event_filter: string[];
  description: string;
  active: boolean;
  created_at: string;
  /** `events`: the trail's events; `operational`: the service's notices. */
  kind: 'events' | 'operational';
  /** The custom headers every delivery carries; their values are never shown. */
  header_names: string[];
  /** The Ed25519 public key (`whpk_…`) v1a signatures verify with; null until ed25519 was asked for. */
  public_key: string | null;
  consecutive_failures?: number;
  last_delivery_at?: string | null;
  /** While the secret replaced by the last rotation still signs beside the current one: until when; else null. */
  previous_secret_expires_at?: string | null;
  [extra: string]: unknown;
}

/** What a registration sends: the url and, optionally, every setting. */
export type WebhookRegistration = { url: string; event_filter?: string[]; description?: string; kind?: 'events' | 'operational' } & Partial<
  WebhookSettings & { headers: Record<string, string> }
>;

/**
 * A change: only the fields given change; null returns a setting to its default; `headers` sets (a value) or
 * removes (null) the headers it names.
 */
export type WebhookChanges = { url?: string; event_filter?: string[]; description?: string } & Partial<
  WebhookSettings & { headers: Record<string, string | null> }
>;

/** One of an endpoint's Ed25519 public keys: the current one (no expiry), or the replaced one during a rotation's overlap. */
export interface WebhookPublicKey {
  public_key: string;
  expires_at: string | null;
  [extra: string]: unknown;
}

/** An operational notice (docs/webhooks.md "Operational events"). */
export interface OperationalEvent {
  id: string;
  type: 'endpoint.failing' | 'endpoint.disabled' | 'endpoint.enabled' | 'stream.failing' | 'stream.recovered';
  occurred_at: string;
  resource: { type: 'webhook_endpoint' | 'log_stream'; id: string };
  details: Record<string, unknown>;
  [extra: string]: unknown;
}

export interface OperationalEventPage {
  events: OperationalEvent[];
  page: { limit: number; returned: number; next_cursor: string | null; has_more: boolean };
}

/** A new signing secret, shown once (registration answers the same two forms of it). */
export interface WebhookSecret {
  endpoint: WebhookEndpoint;
  /** 64 hex: the key of X-Service-Signature (verifyWebhookSignature). */
  secret: string;
  /** The same key for Standard Webhooks libraries (verifyStandardWebhook takes either form). */
  standard_webhooks_secret: string;
  [extra: string]: unknown;
}

export interface RotatedWebhookSecret extends WebhookSecret {
  /** Until then deliveries are signed with the new and the replaced secret; after it with the new one only. */
  previous_secret_expires_at: string;
}

/** The outcome of one test delivery: a failed attempt is a result, not an error. */
export interface WebhookTestResult {
  success: boolean;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  [extra: string]: unknown;
}

/** One delivery of an event to an endpoint (docs/webhooks.md "Delivery log"). */
export interface WebhookDelivery {
  /** `dlv_…` */
  id: string;
  event_id: string;
  /** null once retention has dropped the event. */
  action: string | null;
  /** `failed` also covers deliveries cancelled when their endpoint was disabled. */
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  created_at: string;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  [extra: string]: unknown;
}

export interface DeliveryAttempt {
  attempt: number;
  started_at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  /** At most the first 1 KiB of the receiver's response body. */
  response_excerpt: string;
  [extra: string]: unknown;
}

export interface DeliveryFilters {
  status?: 'pending' | 'succeeded' | 'failed';
  /** Deliveries created at or after: a Date or an RFC 3339 string. */
  since?: Date | string;
  /** Deliveries created before. */
  until?: Date | string;
  /** Page size, 1 to 100 (default 50). */
  limit?: number;
}

export interface DeliveryPage {
  deliveries: WebhookDelivery[];
  page: { limit: number; returned: number; next_cursor: string | null; has_more: boolean };
}

/** A replay of a time range to an endpoint (docs/webhooks.md "Replay"). */
export interface WebhookReplay {
  /** `rpl_…` */
  id: string;
  status: 'running' | 'completed' | 'cancelled';
  since: string;
  until: string;
  only_undelivered: boolean;
  events_matched: number;
  deliveries_created: number;
  created_at: string;
  completed_at: string | null;
  [extra: string]: unknown;
}
