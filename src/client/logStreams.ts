/**
 * The shapes of log streams in the public API (docs/streams.md): what AuditTrailClient's stream methods
 * send and return. Types only.
 */

/** Where a stream delivers; each secret member is write-only (never returned by the API). */
export type StreamDestination =
  | { type: 'splunk_hec'; url: string; token: string; index?: string; source?: string; sourcetype?: string }
  | { type: 'datadog'; url: string; api_key: string; service?: string; tags?: string[] }
  | { type: 'https'; url: string; body?: 'ndjson' | 'json' }
  | { type: 'amqp'; url: string; username: string; password: string; exchange: string; routing_key?: string }
  | {
      type: 's3';
      bucket: string;
      prefix: string;
      region: string;
      endpoint?: string;
      access_key_id: string;
      secret_access_key: string;
      force_path_style?: boolean;
    };

export interface StreamFilter {
  /** Actions and action families (`phi.`, `admin.key.create`); absent or empty: every action. */
  action_prefixes?: string[];
  phi_involved?: boolean;
}

export interface StreamCreation {
  destination: StreamDestination;
  format?: 'native' | 'ocsf';
  /** format ocsf only: the OCSF release of the records (default 1.7.0). */
  ocsf_version?: '1.7.0' | '1.3.0';
  filter?: StreamFilter;
  /** "now" (default) or a past RFC 3339 instant, a Date here: a backfill from there. */
  start_at?: 'now' | string | Date;
  /** Whether each batch carries the tenant's latest signed tree head (default true). */
  tree_heads?: boolean;
}

export interface LogStream {
  /** `str_…` */
  id: string;
  status: 'active' | 'paused' | 'failing';
  /** The destination without its secret. */
  destination: { type: StreamDestination['type']; [member: string]: unknown };
  format: 'native' | 'ocsf';
  /** The OCSF release of an ocsf stream's records; null for native. */
  ocsf_version: '1.7.0' | '1.3.0' | null;
  filter: StreamFilter;
  tree_heads: boolean;
  start_at: string;
  /** The next leaf of the tenant's trail to deliver; null before the first round. */
  position: number | null;
  lag_events: number;
  lag_seconds: number;
  last_delivered_at: string | null;
  last_error: string | null;
  last_error_at: string | null;
  created_at: string;
  [extra: string]: unknown;
}

export interface CreatedLogStream {
  stream: LogStream;
  /** https streams only: the signing secret of every batch, shown this once. */
  secret?: string;
  /** https streams only: the same secret as `whsec_…`, for the Standard Webhooks libraries; shown this once. */
  standard_webhooks_secret?: string;
}

export interface StreamTestResult {
  success: boolean;
  duration_ms: number;
  error: string | null;
  [extra: string]: unknown;
}
