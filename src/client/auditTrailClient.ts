/**
 * A typed client for the public API (`/api/v2/public`), for customers' TypeScript and JavaScript code.
 * It depends on nothing but the platform's fetch, retries 429 (and 503) with exponential backoff and full
 * jitter while honouring Retry-After, and turns the cursor and export walks into async iterators.
 */

import type { AuditEvent } from './auditEvent.ts';
import type { CreatedLogStream, LogStream, StreamCreation, StreamTestResult } from './logStreams.ts';

export interface EventFilters {
  action?: string;
  /** What this user did: exact match on the event's user_id. */
  user_id?: string;
  resource_type?: string;
  /** Who touched this record: exact match on the event's resource_id (with resource_type or without). */
  resource_id?: string;
  phi_involved?: boolean;
  /** Inclusive lower bound: a Date or an RFC 3339 string. */
  since?: Date | string;
  /** Exclusive upper bound: a Date or an RFC 3339 string. */
  until?: Date | string;
}

export interface EventPage {
  events: AuditEvent[];
  page: { limit: number; returned: number; next_cursor: string | null; has_more: boolean };
}

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

/** A customer portal session (docs/portal.md), as minted for the key's tenant. */
export interface PortalSession {
  /** `pss_…` */
  id: string;
  tenant_id: string;
  capabilities: Array<'audit:read' | 'audit:export' | 'webhooks:write'>;
  created_at: string;
  expires_at: string;
  [extra: string]: unknown;
}

export interface PortalSessionLink {
  session: PortalSession;
  /** Opens the portal once; hand it to one browser, never log it. */
  url: string;
}

export interface ClientOptions {
  /** e.g. `https://audit.example.com/api/v2/public` */
  baseUrl: string;
  apiKey: string;
  /** Retries of one call after 429 or 503 before giving up (default 5). */
  maxRetries?: number;
  /** First backoff step; each retry doubles it up to maxDelayMs (defaults 500 ms and 30 s). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  userAgent?: string;
  fetch?: typeof fetch;
}

/** A non-success answer of the API, with its status and documented error body. */
export class AuditTrailApiError extends Error {
  override name = 'AuditTrailApiError';
  readonly status: number;
  readonly code: string;
  readonly body: unknown;
  readonly requestId: string | null;

  constructor(status: number, body: unknown, requestId: string | null) {
    const code = typeof body === 'object' && body !== null && 'error' in body ? String((body as { error: unknown }).error) : 'http_error';
    const message = typeof body === 'object' && body !== null && 'message' in body ? String((body as { message: unknown }).message) : '';
    super(`HTTP ${status} ${code}${message ? `: ${message}` : ''}`);
    this.status = status;
    this.code = code;
    this.body = body;
    this.requestId = requestId;
  }
}

const RETRYABLE = new Set([429, 503]);

export class AuditTrailClient {
  private readonly options: Required<Omit<ClientOptions, 'userAgent' | 'fetch'>> & Pick<ClientOptions, 'userAgent'>;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    this.options = { maxRetries: 5, baseDelayMs: 500, maxDelayMs: 30_000, ...options, baseUrl: options.baseUrl.replace(/\/+$/, '') };
    this.fetchImpl = options.fetch ?? fetch;
  }

  /** One page of events, newest first. */
  async listPage(filters: EventFilters & { limit?: number; cursor?: string } = {}): Promise<EventPage> {
    const { limit, cursor, ...rest } = filters;
    const query = toQuery({ ...filterValues(rest), limit: limit?.toString(), cursor });
    return (await this.request('GET', `/audit/events${query}`)).json() as Promise<EventPage>;
  }

  /** Every page of the window, following next_cursor until has_more is false. */
  async *listPages(filters: EventFilters & { limit?: number } = {}): AsyncGenerator<EventPage> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listPage({ ...filters, cursor });
      yield page;
      if (!page.page.has_more || !page.page.next_cursor) return;
      cursor = page.page.next_cursor;
    }
  }

  /** Every event of the window, one at a time. */
  async *listEvents(filters: EventFilters & { limit?: number } = {}): AsyncGenerator<AuditEvent> {
    for await (const page of this.listPages(filters)) yield* page.events;
  }

  /** One event; an unknown id (or another tenant's) rejects with status 404. */
  async getEvent(eventId: string): Promise<AuditEvent> {
    return (await this.request('GET', `/audit/events/${encodeURIComponent(eventId)}`)).json() as Promise<AuditEvent>;
  }

  /**
   * Every event matching the filters, streamed as NDJSON and walking past the 10,000-row cap: each
   * truncated export is repeated with `until` = the last returned timestamp, which the service guarantees
   * visits every event exactly once.
   */
  async *exportEvents(filters: EventFilters = {}): AsyncGenerator<AuditEvent> {
    let window = filterValues(filters);
    for (;;) {
      const response = await this.request('POST', '/audit/export?format=ndjson', window);
      const truncated = response.headers.get('x-service-truncated') === 'true';
      let last: AuditEvent | undefined;
      for await (const line of ndjsonLines(response)) {
        last = JSON.parse(line) as AuditEvent;
        yield last;
      }
      if (!truncated || !last) return;
      window = { ...window, until: last.timestamp };
    }
  }

  /** Creates a log stream (scope streams:write); an https stream's signing secret is returned this once only. */
  async createStream(creation: StreamCreation): Promise<CreatedLogStream> {
    const body = { ...creation, start_at: creation.start_at instanceof Date ? creation.start_at.toISOString() : creation.start_at };
    return (await this.request('POST', '/audit/streams', body)).json() as Promise<CreatedLogStream>;
  }

  async listStreams(): Promise<LogStream[]> {
    return ((await (await this.request('GET', '/audit/streams')).json()) as { streams: LogStream[] }).streams;
  }

  /** A stream with its position and lag; pause, resume and the others answer it too. */
  async getStream(id: string): Promise<LogStream> {
    return this.streamCall('GET', id, '');
  }

  async pauseStream(id: string): Promise<LogStream> {
    return this.streamCall('POST', id, '/pause');
  }

  /** Resumes a paused stream where it stopped, or makes a failing one try its destination now. */
  async resumeStream(id: string): Promise<LogStream> {
    return this.streamCall('POST', id, '/resume');
  }

  /** Sends one test record to the stream's destination and reports how it answered. */
  async testStream(id: string): Promise<StreamTestResult> {
    return (await this.request('POST', `/audit/streams/${encodeURIComponent(id)}/test`)).json() as Promise<StreamTestResult>;
  }

  async deleteStream(id: string): Promise<void> {
    await this.request('DELETE', `/audit/streams/${encodeURIComponent(id)}`);
  }

  private async streamCall(method: string, id: string, action: string): Promise<LogStream> {
    return ((await (await this.request(method, `/audit/streams/${encodeURIComponent(id)}${action}`)).json()) as { stream: LogStream })
      .stream;
  }

  /** Registers an endpoint; the secret is returned this once only. */
  async registerWebhook(registration: { url: string; event_filter?: string[]; description?: string }): Promise<WebhookSecret> {
    const body = { event_filter: [], description: '', ...registration };
    return (await this.request('POST', '/audit/webhooks', body)).json() as Promise<WebhookSecret>;
  }

  /**
   * Replaces an endpoint's signing secret. The replaced secret keeps signing beside the new one for
   * `overlapS` seconds (server default: one day; 0 retires it at once), so receivers can switch without
   * missing a delivery. Each successful call is a new secret; rotating again within the overlap retires
   * the oldest at once.
   */
  async rotateSecret(id: string, options: { overlapS?: number } = {}): Promise<RotatedWebhookSecret> {
    const body = options.overlapS === undefined ? undefined : { overlap_s: options.overlapS };
    return (
      await this.request('POST', `/audit/webhooks/${encodeURIComponent(id)}/rotate-secret`, body)
    ).json() as Promise<RotatedWebhookSecret>;
  }

  /** Sends one signed `webhook.test` delivery now and reports how the receiver answered. */
  async testWebhook(id: string): Promise<WebhookTestResult> {
    return (await this.request('POST', `/audit/webhooks/${encodeURIComponent(id)}/test`)).json() as Promise<WebhookTestResult>;
  }

  async listWebhooks(): Promise<WebhookEndpoint[]> {
    const body = (await (await this.request('GET', '/audit/webhooks')).json()) as { endpoints: WebhookEndpoint[] };
    return body.endpoints;
  }

  async disableWebhook(id: string): Promise<WebhookEndpoint> {
    const body = (await (await this.request('POST', `/audit/webhooks/${encodeURIComponent(id)}/disable`)).json()) as {
      endpoint: WebhookEndpoint;
    };
    return body.endpoint;
  }

  async deleteWebhook(id: string): Promise<void> {
    await this.request('DELETE', `/audit/webhooks/${encodeURIComponent(id)}`);
  }

  /** One page of an endpoint's deliveries, newest first. */
  async listDeliveryPage(endpointId: string, filters: DeliveryFilters & { cursor?: string } = {}): Promise<DeliveryPage> {
    const { limit, cursor, ...rest } = filters;
    const query = toQuery({ ...filterValues(rest), limit: limit?.toString(), cursor });
    return (await this.request('GET', `${webhookPath(endpointId)}/deliveries${query}`)).json() as Promise<DeliveryPage>;
  }

  /** Every page of an endpoint's delivery log, newest first, following next_cursor to the end. */
  async *listDeliveries(endpointId: string, filters: DeliveryFilters = {}): AsyncGenerator<DeliveryPage> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listDeliveryPage(endpointId, { ...filters, cursor });
      yield page;
      if (!page.page.has_more || !page.page.next_cursor) return;
      cursor = page.page.next_cursor;
    }
  }

  /** One delivery with its attempts. */
  async getDelivery(endpointId: string, deliveryId: string): Promise<{ delivery: WebhookDelivery; attempts: DeliveryAttempt[] }> {
    const response = await this.request('GET', `${webhookPath(endpointId)}/deliveries/${encodeURIComponent(deliveryId)}`);
    return response.json() as Promise<{ delivery: WebhookDelivery; attempts: DeliveryAttempt[] }>;
  }

  /**
   * One more attempt of a failed or pending delivery, made within a second. Rejects with 409
   * `already_delivered` for a succeeded delivery and `endpoint_inactive` for a disabled endpoint.
   */
  async retryDelivery(endpointId: string, deliveryId: string): Promise<WebhookDelivery> {
    const response = await this.request('POST', `${webhookPath(endpointId)}/deliveries/${encodeURIComponent(deliveryId)}/retry`);
    return ((await response.json()) as { delivery: WebhookDelivery }).delivery;
  }

  /**
   * Delivers again every event of [since, until) (at most 90 days) that matches the endpoint's filter;
   * with only_undelivered (the default) those already delivered successfully are skipped. Runs in the
   * background: follow it with getReplay. Rejects with 409 `replay_running` while one runs.
   */
  async replay(
    endpointId: string,
    range: { since: Date | string; until: Date | string; only_undelivered?: boolean },
  ): Promise<WebhookReplay> {
    const response = await this.request('POST', `${webhookPath(endpointId)}/replay`, filterValues(range));
    return ((await response.json()) as { replay: WebhookReplay }).replay;
  }

  async getReplay(endpointId: string, replayId: string): Promise<WebhookReplay> {
    const response = await this.request('GET', `${webhookPath(endpointId)}/replays/${encodeURIComponent(replayId)}`);
    return ((await response.json()) as { replay: WebhookReplay }).replay;
  }

  /**
   * Mints a customer portal link for the key's tenant (scope portal:sessions): `ttlS` 60 to 3600 (default
   * 900), `capabilities` a subset of the key's scopes including audit:read (default audit:read only).
   */
  async createPortalSession(options: { ttlS?: number; capabilities?: PortalSession['capabilities'] } = {}): Promise<PortalSessionLink> {
    const body: Record<string, unknown> = {};
    if (options.ttlS !== undefined) body.ttl_s = options.ttlS;
    if (options.capabilities !== undefined) body.capabilities = options.capabilities;
    return (await this.request('POST', '/portal/sessions', body)).json() as Promise<PortalSessionLink>;
  }

  /** Ends a portal session at once; its next request is refused. Idempotent. */
  async endPortalSession(id: string): Promise<void> {
    await this.request('DELETE', `/portal/sessions/${encodeURIComponent(id)}`);
  }

  private async request(method: string, path: string, body?: unknown): Promise<Response> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.apiKey}`, accept: 'application/json' };
    if (this.options.userAgent) headers['user-agent'] = this.options.userAgent;
    if (body !== undefined) headers['content-type'] = 'application/json';
    for (let attempt = 0; ; attempt += 1) {
      const response = await this.fetchImpl(`${this.options.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (response.ok) return response;
      const errorBody = await response.json().catch(() => undefined);
      if (!RETRYABLE.has(response.status) || attempt >= this.options.maxRetries) {
        throw new AuditTrailApiError(response.status, errorBody, response.headers.get('x-request-id'));
      }
      await sleep(this.backoffMs(attempt, response.headers.get('retry-after')));
    }
  }

  /** Full jitter over an exponential ceiling, but never sooner than the server's Retry-After. */
  private backoffMs(attempt: number, retryAfter: string | null): number {
    const ceiling = Math.min(this.options.maxDelayMs, this.options.baseDelayMs * 2 ** attempt);
    const jittered = Math.random() * ceiling;
    const serverSays = retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) * 1000 : 0;
    return Math.max(jittered, serverSays);
  }
}

function webhookPath(endpointId: string): string {
  return `/audit/webhooks/${encodeURIComponent(endpointId)}`;
}

/** The filters as the API takes them: instants in RFC 3339. */
function filterValues(filters: object): Record<string, string | boolean | undefined> {
  return Object.fromEntries(
    Object.entries(filters as Record<string, Date | string | boolean | undefined>).map(([name, value]) => [
      name,
      value instanceof Date ? value.toISOString() : value,
    ]),
  );
}

function toQuery(values: Record<string, string | boolean | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value !== undefined) params.set(name, String(value));
  const text = params.toString();
  return text ? `?${text}` : '';
}

async function* ndjsonLines(response: Response): AsyncGenerator<string> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line.length > 0) yield line;
      newline = buffered.indexOf('\n');
    }
  }
  buffered += decoder.decode();
  if (buffered.trim().length > 0) yield buffered;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
