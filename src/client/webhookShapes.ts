/**
 * The shapes of webhook endpoints, their deliveries and replays in the public API (docs/webhooks.md): what
 * AuditTrailClient's webhook methods send and return. Types only.
 */

export interface WebhookEndpoint {
  id: string;
  url: string;
  event_filter: string[];
  description: string;
  active: boolean;
  created_at: string;
  consecutive_failures?: number;
  last_delivery_at?: string | null;
  [extra: string]: unknown;
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
