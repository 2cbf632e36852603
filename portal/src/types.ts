/** The shapes the portal reads from the public API (docs/api.md, docs/webhooks.md). */
export type { AuditEvent } from '../../src/client/auditEvent.ts';
export type { CreatedLogStream, LogStream, StreamTestResult } from '../../src/client/logStreams.ts';

type Capability = 'audit:read' | 'audit:export' | 'webhooks:write' | 'streams:write';

export interface PortalSession {
  readonly id: string;
  readonly tenant_id: string;
  readonly capabilities: readonly Capability[];
  readonly created_at: string;
  readonly expires_at: string;
}

export type { OperationalEvent, PayloadFilter } from '../../src/client/webhookShapes.ts';
import type { PayloadFilter } from '../../src/client/webhookShapes.ts';

export interface WebhookEndpoint {
  readonly id: string;
  readonly url: string;
  readonly event_filter: readonly string[];
  readonly description: string;
  readonly active: boolean;
  readonly created_at: string;
  readonly consecutive_failures: number;
  readonly last_delivery_at: string | null;
  readonly previous_secret_expires_at: string | null;
  readonly kind: 'events' | 'operational';
  readonly payload_filter: PayloadFilter | null;
  readonly header_names: readonly string[];
  readonly timeout_s: number | null;
  readonly retry_schedule_s: readonly number[] | null;
  readonly rate_limit_per_s: number | null;
  readonly ordered: boolean;
  readonly signature_schemes: ReadonlyArray<'hmac' | 'ed25519'>;
  readonly public_key: string | null;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface Delivery {
  readonly id: string;
  readonly event_id: string;
  readonly action: string | null;
  readonly status: DeliveryStatus;
  readonly attempts: number;
  readonly created_at: string;
  readonly next_attempt_at: string | null;
  readonly last_attempt_at: string | null;
  readonly last_status_code: number | null;
  readonly last_error: string | null;
}

export interface DeliveryAttempt {
  readonly attempt: number;
  readonly started_at: string;
  readonly duration_ms: number;
  readonly status_code: number | null;
  readonly error: string | null;
  readonly response_excerpt: string;
}

export interface Replay {
  readonly id: string;
  readonly status: 'running' | 'completed' | 'cancelled';
  readonly since: string;
  readonly until: string;
  readonly only_undelivered: boolean;
  readonly events_matched: number;
  readonly deliveries_created: number;
}

export interface TestResult {
  readonly success: boolean;
  readonly status_code: number | null;
  readonly duration_ms: number;
  readonly error: string | null;
}
